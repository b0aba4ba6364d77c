package clustertest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/telemetry"
	"tidemark.io/services/platform/testenv"
)

// jaegerBinary finds the Jaeger built by `make thirdparty`.
func jaegerBinary(t *testing.T) string {
	if p := testenv.FindJaeger(); p != "" {
		return p
	}
	testenv.Unavailable(t, "Jaeger (.bin/jaeger)", "`make thirdparty` builds it (`make test` does), or set TIDEMARK_JAEGER_BIN")
	return ""
}

// startJaeger runs a real Jaeger on free loopback ports with in-memory
// storage, returning its OTLP gRPC address and its query API base URL.
func startJaeger(t *testing.T) (otlp, api string) {
	j := newJaeger(t)
	j.Start()
	return j.OTLP, j.API
}

// jaeger is a Jaeger process that a test can stop and start again on the
// same OTLP and query addresses (its storage is in memory: a start begins
// with no traces).
type jaeger struct {
	t         *testing.T
	bin, cfg  string
	OTLP, API string // OTLP gRPC address, query API base URL
	cmd       *exec.Cmd
	logs      *strings.Builder
	env       []string // added to this process's environment
}

// newJaeger picks Jaeger's addresses and writes its configuration; it does
// not start it.
func newJaeger(t *testing.T) *jaeger {
	j := &jaeger{t: t, bin: jaegerBinary(t), OTLP: freeAddr(t)}
	api, queryGRPC := freeAddr(t), freeAddr(t)
	j.API = "http://" + api
	j.cfg = filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(j.cfg, []byte(telemetry.LocalJaegerConfig(j.OTLP, api, queryGRPC, nil)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	return j
}

// Start runs Jaeger and waits until its query API answers.
func (j *jaeger) Start() {
	j.t.Helper()
	j.logs = &strings.Builder{}
	j.cmd = exec.Command(j.bin, "--config", j.cfg)
	j.cmd.Stdout, j.cmd.Stderr = j.logs, j.logs
	j.cmd.Env = append(os.Environ(), j.env...)
	if err := j.cmd.Start(); err != nil {
		j.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(j.API + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("jaeger did not answer on %s:\n%s", j.API, j.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop kills the Jaeger process (by its PID) and waits for it to exit;
// its traces go with it.
func (j *jaeger) Stop() {
	if j.cmd == nil {
		return
	}
	_ = j.cmd.Process.Kill()
	_ = j.cmd.Wait()
	j.cmd = nil
}

type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
		ProcessID string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

func queryTraces(t *testing.T, api, service, operation string) []jaegerTrace {
	q := url.Values{"service": {service}, "limit": {"200"}, "lookback": {"1h"}}
	if operation != "" {
		q.Set("operation", operation)
	}
	resp, err := http.Get(api + "/api/traces?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Data
}

func tagInt(tags []struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}, key string) (int64, bool) {
	for _, tg := range tags {
		if tg.Key == key {
			switch v := tg.Value.(type) {
			case float64:
				return int64(v), true
			case string:
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// A real Jaeger receives, from a real cluster, the traces of the follower
// fetches that moved the HW (leader span with hw.before < hw.after, in one
// trace with the follower's span) and acks=all produce spans linked to them.
func TestJaegerShowsHWAdvancingFetchesAndCommittedProduces(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Jaeger binary next to a cluster")
	otlp, api := startJaeger(t)
	c := Start(t, Options{Adjust: func(cfg *broker.Config) { cfg.Telemetry.OTLPEndpoint = otlp }})
	c.CreateTopic("traced", 1, 3, map[string]string{"min.insync.replicas": "2"})
	leader := c.Leader("traced", 0)
	for i := 0; i < 5; i++ {
		if _, err := c.Produce(context.Background(), "traced", 0, -1, "r"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	for id := int32(1); id <= 3; id++ { // flush every broker's spans
		if err := c.StopBroker(id); err != nil {
			t.Logf("stop broker %d: %v", id, err)
		}
	}
	leaderService := "tidemark-broker-" + strconv.Itoa(int(leader))
	var fetchSpans map[string]bool
	c.WaitFor(20*time.Second, "HW-advancing fetch traces in Jaeger", func() bool {
		fetchSpans = map[string]bool{}
		joined := false
		for _, tr := range queryTraces(t, api, leaderService, "tidemark.replication.v1.ReplicationService/ReplicaFetch") {
			services := map[string]bool{}
			for _, sp := range tr.Spans {
				services[tr.Processes[sp.ProcessID].ServiceName] = true
				before, ok1 := tagInt(sp.Tags, "tidemark.hw.before")
				after, ok2 := tagInt(sp.Tags, "tidemark.hw.after")
				if ok1 && ok2 && before < after && tr.Processes[sp.ProcessID].ServiceName == leaderService {
					fetchSpans[sp.SpanID] = true
				}
			}
			if len(services) >= 2 {
				joined = true // the follower's span and the leader's, one trace
			}
		}
		return len(fetchSpans) > 0 && joined
	})
	linked := 0
	for _, tr := range queryTraces(t, api, leaderService, "tidemark.broker.v1.BrokerService/Produce") {
		for _, sp := range tr.Spans {
			for _, ref := range sp.References {
				if fetchSpans[ref.SpanID] {
					linked++
				}
			}
		}
	}
	if linked == 0 {
		t.Fatal("no acks=all produce span in Jaeger links to a HW-advancing fetch span")
	}
	t.Logf("%d HW-advancing fetch spans on the leader, %d produce spans linked to them", len(fetchSpans), linked)
}

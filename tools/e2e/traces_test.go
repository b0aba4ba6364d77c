package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"tidemark.io/services/client"
)

// replicaFetchOp is the span name of a follower fetch round trip, on the
// follower (client) and on the leader (server).
const replicaFetchOp = "tidemark.replication.v1.ReplicationService/ReplicaFetch"

// Jaeger's HTTP API (the query service's /api), the parts read here.
type jaegerTraces struct {
	Data []jaegerTrace `json:"data"`
}

type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerSpan struct {
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	ProcessID     string      `json:"processID"`
	Tags          []jaegerTag `json:"tags"`
}

type jaegerProcess struct {
	ServiceName string `json:"serviceName"`
}

type jaegerTag struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

func (s jaegerSpan) tag(key string) (string, bool) {
	for _, t := range s.Tags {
		if t.Key == key {
			var str string
			if json.Unmarshal(t.Value, &str) == nil {
				return str, true
			}
			return string(bytes.TrimSpace(t.Value)), true
		}
	}
	return "", false
}

func (s jaegerSpan) intTag(key string) (int64, bool) {
	v, ok := s.tag(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func jaegerGet(path string, query url.Values, into any) error {
	u := jaegerURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, body)
	}
	return json.Unmarshal(body, into)
}

// hwSpan is a leader's fetch span that moved the HW, with the follower span
// of the same round trip.
type hwSpan struct {
	traceID          string
	leader, follower string
	topic, partition string
	before, after    int64
}

// findHWSpans looks through a broker's traces for leader spans of follower
// fetches that advanced the HW of the topic.
func findHWSpans(service, topic string) ([]hwSpan, error) {
	tags, _ := json.Marshal(map[string]string{"tidemark.hw.advanced": "true", "tidemark.topic": topic})
	var tr jaegerTraces
	err := jaegerGet("/api/traces", url.Values{
		"service": {service}, "operation": {replicaFetchOp}, "tags": {string(tags)},
		"limit": {"50"}, "lookback": {"1h"},
	}, &tr)
	if err != nil {
		return nil, err
	}
	var out []hwSpan
	for _, trace := range tr.Data {
		var leaderSpan *jaegerSpan
		follower := ""
		for i, sp := range trace.Spans {
			if sp.OperationName != replicaFetchOp {
				continue
			}
			kind, _ := sp.tag("span.kind")
			switch kind {
			case "server":
				if _, ok := sp.tag("tidemark.hw.before"); ok {
					leaderSpan = &trace.Spans[i]
				}
			case "client":
				if adv, _ := sp.tag("tidemark.hw.advanced"); adv == "true" {
					follower = trace.Processes[sp.ProcessID].ServiceName
				}
			}
		}
		if leaderSpan == nil || trace.Processes[leaderSpan.ProcessID].ServiceName != service {
			continue
		}
		h := hwSpan{traceID: trace.TraceID, leader: service, follower: follower}
		h.topic, _ = leaderSpan.tag("tidemark.topic")
		h.partition, _ = leaderSpan.tag("tidemark.partition")
		h.before, _ = leaderSpan.intTag("tidemark.hw.before")
		h.after, _ = leaderSpan.intTag("tidemark.hw.after")
		out = append(out, h)
	}
	return out, nil
}

// TestJaegerHWTraces is playbook 5: the containers export their traces to
// the stack's Jaeger, whose HTTP API shows follower fetch round trips that
// advanced a leader's high watermark: the leader's span carries
// tidemark.hw.advanced=true and tidemark.hw.before < tidemark.hw.after, and
// the follower's span of the same trace is marked too.
func TestJaegerHWTraces(t *testing.T) {
	_, c, tl := begin(t, "5 HW traces in Jaeger")
	topic := topicName("e2e.traces")
	parts := c.createTopic(tl, topic, nil)
	defer c.deleteTopic(topic)

	led := newLedger(topic, 3)
	pr := newProducer(c, led, "traced", client.ProducerOptions{DeliveryTimeout: 30 * time.Second})
	if err := pr.burst(60, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = pr.halt(10 * time.Second)
	a, f := led.counts()
	tl.mark("produced 60 records: %d acknowledged, %d failed", a, f)

	// Spans leave the brokers in batches (every few seconds) and Jaeger
	// indexes them as they come: poll.
	wantServices := []string{"tidemark-broker-1", "tidemark-broker-2", "tidemark-broker-3"}
	deadline := time.Now().Add(45 * time.Second)
	var services []string
	for {
		var resp struct {
			Data []string `json:"data"`
		}
		err := jaegerGet("/api/services", nil, &resp)
		if err == nil {
			services = resp.Data
			missing := false
			for _, w := range wantServices {
				missing = missing || !slices.Contains(services, w)
			}
			if !missing {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger /api/services: %v (error %v), want %v", services, err, wantServices)
		}
		time.Sleep(time.Second)
	}
	slices.Sort(services)
	tl.mark("Jaeger /api/services: %v", services)

	// Every broker leads one partition of the topic, so each one has leader
	// spans that moved a HW.
	leaders := map[string]bool{}
	for _, p := range parts {
		leaders[brokerSvc(p.GetLeader())] = true
	}
	for svc := range leaders {
		service := "tidemark-" + svc
		var found []hwSpan
		var err error
		// The follower's span of a round trip ends (and leaves its broker)
		// after the leader's: wait until the trace holds both.
		joined := func(h hwSpan) bool { return h.follower != "" && h.follower != service }
		for {
			found, err = findHWSpans(service, topic)
			if err == nil && slices.ContainsFunc(found, joined) {
				break
			}
			if time.Now().After(deadline) {
				if len(found) == 0 {
					t.Fatalf("no HW-advancing %s spans of %s from %s in Jaeger (error %v)", replicaFetchOp, topic, service, err)
				}
				break // reported below
			}
			time.Sleep(time.Second)
		}
		h := found[0]
		tl.mark("%s: %d HW-advancing fetch traces, e.g. trace %s: %s-%s HW %d -> %d, follower %s",
			service, len(found), h.traceID, h.topic, h.partition, h.before, h.after, h.follower)
		for _, h := range found {
			if h.before >= h.after {
				t.Errorf("trace %s: leader span of %s has tidemark.hw.before %d >= tidemark.hw.after %d", h.traceID, service, h.before, h.after)
			}
			if h.topic != topic {
				t.Errorf("trace %s: topic %q, want %q", h.traceID, h.topic, topic)
			}
		}
		if !slices.ContainsFunc(found, joined) {
			t.Errorf("%s: no trace holds the follower's span of the round trip next to the leader's", service)
		}
	}
}

package benchcmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// jetStreamSide runs the shapes against a 3-node JetStream cluster on
// loopback (file storage, R3 streams), each node a separate nats-server,
// with mutual TLS on client connections and routes unless plaintext (the
// same security as tidemark's side, on certificates of the same kind).
type jetStreamSide struct {
	binDir    string // holds nats-server and nats
	procs     int    // GOMAXPROCS of each node
	plaintext bool
	dir       string
	log       *os.File
	nodes     []*daemon
	urls      []string
	// monitors are the nodes' monitoring endpoints, in the order of nodes.
	monitors []string
	// profilers are the nodes' /debug/pprof addresses (prof_port), in the
	// order of nodes: loopback only, as tidemark's brokers serve theirs.
	profilers []string
}

func (j *jetStreamSide) serverPIDs() []int {
	var pids []int
	for _, d := range j.nodes {
		if d != nil && d.cmd.Process != nil {
			pids = append(pids, d.cmd.Process.Pid)
		}
	}
	return pids
}

// jetStreamConfig is one node's configuration: clients, routes and
// monitoring on ports of the run's own range, store in the run's temp dir;
// with tls (the node's files), clients and routes need a certificate the
// CA signed, as tidemark's links do. Monitoring stays plain HTTP on
// loopback, like tidemark's metrics.
func jetStreamConfig(name, dir string, client, route, monitor, prof int, routes []string, tls *tlsconf.Options) string {
	tlsBlock := ""
	if tls != nil {
		tlsBlock = fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }", tls.Cert, tls.Key, tls.CA)
	}
	return fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
prof_port: %d
%s
jetstream { store_dir: %q }
cluster { name: bench, listen: 127.0.0.1:%d, routes: [%s]
  %s
}
`, name, client, monitor, prof, tlsBlock, dir, route, strings.Join(routes, ", "), tlsBlock)
}

// jetStreamClient is the benchmark clients' certificate name.
const jetStreamClient = "bench-client"

// pkiDir holds the run's CA and the nodes' and client's certificates.
func (j *jetStreamSide) pkiDir() string { return filepath.Join(j.dir, "pki") }

// clientTLS is the clients' TLS settings, nil when plaintext.
func (j *jetStreamSide) clientTLS() *tlsconf.Options {
	if j.plaintext {
		return nil
	}
	o := pki.Options(j.pkiDir(), jetStreamClient)
	return &o
}

// connectOptions are nats.go's options for the run's security.
func (j *jetStreamSide) connectOptions(more ...nats.Option) ([]nats.Option, error) {
	if t := j.clientTLS(); t != nil {
		c, err := t.Client()
		if err != nil {
			return nil, err
		}
		more = append(more, nats.Secure(c))
	}
	return more, nil
}

// cliTLSArgs are the nats CLI's flags for the run's security.
func (j *jetStreamSide) cliTLSArgs() []string {
	t := j.clientTLS()
	if t == nil {
		return nil
	}
	return []string{"--tlscert", t.Cert, "--tlskey", t.Key, "--tlsca", t.CA}
}

func (j *jetStreamSide) start(ctx context.Context) error {
	base, err := loopback.FreeRange(rand.New(rand.NewPCG(rand.Uint64(), 2)), 12)
	if err != nil {
		return err
	}
	scheme := "tls"
	if j.plaintext {
		scheme = "nats"
	} else {
		leaves := []pki.Leaf{{Name: jetStreamClient}}
		for i := range 3 {
			leaves = append(leaves, pki.Leaf{Name: fmt.Sprintf("nats-%d", i+1)})
		}
		if _, err := pki.Ensure(j.pkiDir(), leaves...); err != nil {
			return err
		}
	}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", base+3+i))
		j.urls = append(j.urls, fmt.Sprintf("%s://127.0.0.1:%d", scheme, base+i))
	}
	for i := range 3 {
		name := fmt.Sprintf("nats-%d", i+1)
		var nodeTLS *tlsconf.Options
		if !j.plaintext {
			o := pki.Options(j.pkiDir(), name)
			nodeTLS = &o
		}
		store := filepath.Join(j.dir, name)
		if err := os.MkdirAll(store, 0o755); err != nil {
			return err
		}
		conf := filepath.Join(j.dir, name+".conf")
		if err := os.WriteFile(conf, []byte(jetStreamConfig(name, store, base+i, base+3+i, base+6+i, base+9+i, routes, nodeTLS)), 0o644); err != nil {
			return err
		}
		d, err := startDaemon(name, filepath.Join(j.dir, name+".log"), []string{"GOMAXPROCS=" + strconv.Itoa(j.procs)},
			filepath.Join(j.binDir, "nats-server"), "-c", conf)
		if err != nil {
			return err
		}
		j.nodes = append(j.nodes, d)
		fmt.Fprintf(j.log, "started %s pid %d (client %s)\n", name, d.cmd.Process.Pid, j.urls[i])
	}
	for i := range 3 {
		j.monitors = append(j.monitors, fmt.Sprintf("http://127.0.0.1:%d", base+6+i))
		j.profilers = append(j.profilers, fmt.Sprintf("127.0.0.1:%d", base+9+i))
		if err := waitJetStream(ctx, j.monitors[i]); err != nil {
			return fmt.Errorf("nats-%d: %w", i+1, err)
		}
	}
	return nil
}

// metaLeader is the part of /jsz that says whether the cluster has elected
// the leader that creates streams.
type metaLeader struct {
	Meta struct {
		Leader string `json:"leader"`
	} `json:"meta_cluster"`
}

// waitJetStream polls a node's monitoring endpoint until it is healthy
// and knows the cluster's meta leader (before that, creating a stream
// times out).
func waitJetStream(ctx context.Context, monitor string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := jetStreamReady(ctx, monitor)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream not healthy after 30s: %v", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func jetStreamReady(ctx context.Context, monitor string) error {
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, monitor+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("%s answered %s", path, resp.Status)
		}
		return resp, err
	}
	resp, err := get("/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp, err = get("/jsz"); err != nil {
		return err
	}
	defer resp.Body.Close()
	var m metaLeader
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return fmt.Errorf("/jsz: %v", err)
	}
	if m.Meta.Leader == "" {
		return errors.New("no JetStream meta leader yet")
	}
	return nil
}

func (j *jetStreamSide) stop() {
	for _, d := range j.nodes {
		if err := d.stop(10 * time.Second); err != nil {
			fmt.Fprintln(j.log, err)
		} else {
			fmt.Fprintf(j.log, "stopped %s\n", d.name)
		}
	}
	j.nodes = nil
}

// asyncBatch is `nats bench js pub async --batch`: the shape's window in
// messages (at least 1), 0 for the tool's default.
func (s Shape) asyncBatch() int {
	if s.InFlight <= 0 {
		return 0
	}
	return max(1, s.InFlight/max(1, s.Size))
}

func streamOf(s Shape) string { return "bench_" + strings.ReplaceAll(s.Name, "-", "_") }

// run measures one shape with `nats bench js` (paced shapes with nats.go,
// jetstream_paced.go: nats bench has no rate to hold).
func (j *jetStreamSide) run(ctx context.Context, s Shape) Figure {
	if s.LeaderAcks {
		return Figure{} // no leader-only acknowledgement: shown as –
	}
	if s.paced() {
		return j.runPaced(ctx, s)
	}
	args := append([]string{"-s", strings.Join(j.urls, ",")}, j.cliTLSArgs()...)
	args = append(args, "bench", "js")
	switch s.Mode {
	case Consume:
		// An ordered consumer reads the stream from the start without acks,
		// as `tidemark perf consume` reads a partition.
		args = append(args, "ordered", "--stream", streamOf(Shape{Name: s.ReadsFrom}))
	default:
		mode := []string{"sync"}
		if s.Mode == Batch {
			mode = []string{"async"}
			if b := s.asyncBatch(); b > 0 {
				mode = append(mode, "--batch", strconv.Itoa(b))
			}
		}
		args = append(args, "pub")
		args = append(args, mode...)
		args = append(args, "bench."+s.Name, "--stream", streamOf(s), "--create", "--replicas", "3",
			"--storage", "file", "--purge", "--clients", strconv.Itoa(s.Producers))
	}
	args = append(args, "--msgs", strconv.FormatInt(s.Records, 10), "--size", strconv.Itoa(s.Size), "--no-progress")
	var f Figure
	// A refused placement (jetstream_placement.go) is measured again; the
	// log keeps every attempt.
	_ = createWhilePlacementSettles(ctx, j.log, s.Name, func() error {
		out, cpu, err := runToolCPU(ctx, toolTimeout, j.log, nil, filepath.Join(j.binDir, "nats"), args...)
		f = withClientCPU(parsed(ParseNats, out, err), cpu)
		if f.Err != "" {
			return errors.New(f.Err)
		}
		return nil
	})
	return f
}

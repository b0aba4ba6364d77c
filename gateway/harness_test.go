package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

// testCluster is a real in-process cluster (embedded etcd, 2 controllers,
// 3 brokers) with the addresses a gateway needs.
type testCluster struct {
	*clustertest.Cluster
	controllers []string
	brokers     []string
}

func startCluster(t testing.TB) *testCluster { return startClusterWith(t, clustertest.Options{}) }

// startClusterWith starts a cluster with options o (their AdjustController
// runs before the harness notes the controller's address).
func startClusterWith(t testing.TB, o clustertest.Options) *testCluster {
	t.Helper()
	tc := &testCluster{}
	var mu sync.Mutex
	adjust := o.AdjustController
	o.AdjustController = func(cfg *controller.Config) {
		if adjust != nil {
			adjust(cfg)
		}
		mu.Lock()
		defer mu.Unlock()
		tc.controllers = append(tc.controllers, cfg.Listen)
	}
	tc.Cluster = clustertest.Start(t, o)
	for id := int32(1); id <= 3; id++ {
		tc.brokers = append(tc.brokers, tc.BrokerConfig(id).Listen)
	}
	return tc
}

// startGateway runs a plaintext gateway on a free port against tc (the
// in-process cluster speaks plaintext).
func startGateway(t testing.TB, tc *testCluster, adjust func(*Options)) *Gateway {
	t.Helper()
	o := DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.TLS = tlsconf.Plain()
	o.Controllers = config.StringList(tc.controllers)
	o.Brokers = config.StringList(tc.brokers)
	if adjust != nil {
		adjust(&o)
	}
	g, err := Start(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Stop(ctx); err != nil {
			t.Errorf("stop gateway: %v", err)
		}
	})
	return g
}

// rest calls one gateway over real HTTP.
type rest struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newREST(t testing.TB, g *Gateway) *rest {
	return &rest{t: t, base: "http://" + g.Addr(), hc: &http.Client{Timeout: 60 * time.Second}}
}

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends body (a string, []byte, nil or a value to marshal as JSON).
func (r *rest) do(method, path string, body any, hdr ...string) answer {
	r.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// open sends a request and returns the answer as soon as its headers
// arrive, for streams; closeBody ends it.
func (r *rest) open(method, path string, body any) (*http.Response, func()) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		cancel()
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp, func() {
		cancel()
		resp.Body.Close()
	}
}

// ok calls and requires 200, decoding the answer into out (when not nil).
func (r *rest) ok(method, path string, body, out any) {
	r.t.Helper()
	a := r.do(method, path, body)
	if a.status != http.StatusOK {
		r.t.Fatalf("%s %s: status %d, want 200: %s", method, path, a.status, a.body)
	}
	if out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			r.t.Fatalf("%s %s: decoding %s: %v", method, path, a.body, err)
		}
	}
}

// fails calls and requires an error answer with the given HTTP status and
// code name, returning the error body.
func (r *rest) fails(method, path string, body any, status int, name string) errorBody {
	r.t.Helper()
	return expectError(r.t, r.do(method, path, body), method+" "+path, status, name)
}

func expectError(t testing.TB, a answer, what string, status int, name string) errorBody {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: error with Content-Type %q, want JSON", what, ct)
	}
	var e errorBody
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("%s: error body %s is not JSON: %v", what, a.body, err)
	}
	if e.Name != name {
		t.Fatalf("%s: error %s (%s), want %s", what, e.Name, e.Message, name)
	}
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && a.header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d without Retry-After", what, status)
	}
	return e
}

// waitFor polls cond every 50 ms until it holds, failing after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// env is one real cluster with a gateway in front of it.
type env struct {
	tc *testCluster
	g  *Gateway
	r  *rest
}

// TestREST drives the REST API of a gateway in front of a real cluster, in
// the order a user would: healthy cluster first, then a leader crash, then
// too few replicas left for acks=all. The gRPC reflection checks run on
// the same cluster before the crashes.
func TestREST(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, func(o *Options) { o.MaxBodyBytes = 256 << 10 })
	e := &env{tc: tc, g: g, r: newREST(t, g)}

	steps := []struct {
		name string
		run  func(*testing.T, *env)
	}{
		{"OpenAPI", testOpenAPI},
		{"Console", testConsole},
		{"Cluster", testDescribeCluster},
		{"CreateTopics", testCreateTopics},
		{"ProduceFetch", testProduceFetch},
		{"Idempotence", testIdempotentRetry},
		{"Streams", testStreams},
		{"Describe", testDescribeHealthy},
		{"Configs", testConfigs},
		{"Users", testUsers},
		{"ClientQuotas", testClientQuotas},
		{"ElectLeaders", testElectLeaders},
		{"Reassign", testReassign},
		{"ACLs", testACLs},
		{"BadInput", testBadInput},
		{"TooLarge", testTooLarge},
		{"Tracing", testTracing},
		{"GRPC", testGRPC},
		{"Groups", testGroups},
		{"LeaderCrash", testLeaderCrash},
		{"NotEnoughReplicas", testNotEnoughReplicas},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, e.with(t)) }) {
			t.FailNow() // later steps build on earlier ones
		}
	}
}

// with returns e reporting to t.
func (e *env) with(t *testing.T) *env {
	r := *e.r
	r.t = t
	return &env{tc: e.tc, g: e.g, r: &r}
}

// call sends a JSON body and decodes a 200 answer into out with protojson.
func (e *env) call(method, path string, body any, out proto.Message) {
	e.r.t.Helper()
	a := e.r.do(method, path, body)
	// A fresh cluster's group coordinator answers so while it loads its
	// partition of __consumer_offsets (retriable; the README says to retry).
	for deadline := time.Now().Add(15 * time.Second); a.status == http.StatusServiceUnavailable &&
		strings.Contains(string(a.body), `"COORDINATOR_LOAD_IN_PROGRESS"`) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		a = e.r.do(method, path, body)
	}
	if a.status != http.StatusOK {
		e.r.t.Fatalf("%s %s: status %d: %s", method, path, a.status, a.body)
	}
	if out != nil {
		if err := protojson.Unmarshal(a.body, out); err != nil {
			e.r.t.Fatalf("%s %s: decoding %s: %v", method, path, a.body, err)
		}
	}
}

// decode reads a protojson answer.
func decode(t testing.TB, data []byte, out proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal(data, out); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

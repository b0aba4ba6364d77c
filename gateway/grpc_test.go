package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/testenv"
)

// grpcurlBin is where `make tools` builds grpcurl.
const grpcurlBin = "../.bin/grpcurl"

// grpcCaller makes gRPC calls from JSON, with the services' own reflection
// as the only source of types, the way grpcurl does.
type grpcCaller interface {
	// list names the services addr serves.
	list(t testing.TB, addr string) []string
	// call invokes method ("pkg.Service/Method") with a JSON request. It
	// returns the JSON answer, or the error status as JSON (code, message,
	// details) and ok false.
	call(t testing.TB, addr, method, body string) (out string, ok bool)
}

// testGRPC makes the REST calls' gRPC equivalents against the controller
// and the brokers directly: with a reflection client that works the way
// grpcurl does, and with the grpcurl binary `make tools` builds (missing:
// a failure under CI, a reported skip elsewhere).
func testGRPC(t *testing.T, e *env) {
	t.Run("reflection", func(t *testing.T) { grpcScript(t, e, reflectionCaller{}, "grpc-reflection") })
	t.Run("grpcurl", func(t *testing.T) {
		testenv.SkipIfShort(t, "the reflection leg runs the same script without a built grpcurl")
		bin := testenv.RequireFile(t, grpcurlBin, "grpcurl", "`make tools` builds it (`make test` does)")
		grpcScript(t, e, grpcurl{bin: bin}, "grpc-grpcurl")
	})
}

// grpcScript creates a topic, produces with acks=all, fetches and
// describes, then checks that bad input gets the documented error.
func grpcScript(t *testing.T, e *env, c grpcCaller, topic string) {
	var cluster adminv1.DescribeClusterResponse
	e.call(http.MethodGet, "/v1/cluster", nil, &cluster)
	ctrl := cluster.GetController().GetAddress()

	if got := c.list(t, ctrl); !slices.Contains(got, "tidemark.admin.v1.AdminService") {
		t.Fatalf("controller services: %v", got)
	}
	if got := c.list(t, e.tc.brokers[0]); !slices.Contains(got, "tidemark.broker.v1.BrokerService") {
		t.Fatalf("broker services: %v", got)
	}
	if got := c.list(t, e.g.Addr()); !slices.Contains(got, "grpc.health.v1.Health") {
		t.Fatalf("gateway services: %v", got)
	}
	if out, ok := c.call(t, e.g.Addr(), "grpc.health.v1.Health/Check", "{}"); !ok || !strings.Contains(out, "SERVING") {
		t.Fatalf("gateway health: %s", out)
	}

	var created adminv1.CreateTopicsResponse
	callOK(t, c, ctrl, "tidemark.admin.v1.AdminService/CreateTopics",
		fmt.Sprintf(`{"topics": [{"name": %q, "numPartitions": 1, "replicationFactor": 3}], "timeoutMs": 10000}`, topic), &created)
	if r := created.GetResults(); len(r) != 1 || r[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v", &created)
	}
	var desc adminv1.DescribeTopicsResponse
	callOK(t, c, ctrl, "tidemark.admin.v1.AdminService/DescribeTopics", fmt.Sprintf(`{"topics": [%q]}`, topic), &desc)
	leader := desc.GetTopics()[0].GetPartitions()[0].GetLeader()
	leaderAddr := e.tc.brokers[leader-1]

	var p brokerv1.ProduceResponse
	callOK(t, c, leaderAddr, "tidemark.broker.v1.BrokerService/Produce",
		fmt.Sprintf(`{"topic": %q, "partition": 0, "acks": -1, "records": {"records": [{"key": %q, "value": %q}]}}`,
			topic, b64("k"), b64("hello")), &p)
	var f brokerv1.FetchResponse
	callOK(t, c, leaderAddr, "tidemark.broker.v1.BrokerService/Fetch", fmt.Sprintf(`{"topic": %q, "partition": 0, "offset": 0}`, topic), &f)
	if recs := f.GetRecords(); len(recs) != 1 || string(recs[0].GetValue()) != "hello" || f.GetHighWatermark() != 1 {
		t.Fatalf("fetch: %v", &f)
	}

	// The documented errors: the Kafka code, its name and the bad field
	// travel in the status details.
	out, ok := c.call(t, leaderAddr, "tidemark.broker.v1.BrokerService/Produce",
		fmt.Sprintf(`{"topic": %q, "partition": 0, "acks": 5, "records": {"records": [{"value": "eA=="}]}}`, topic))
	expectStatus(t, out, ok, "INVALID_REQUIRED_ACKS", "acks")
	follower := e.tc.brokers[leader%3]
	out, ok = c.call(t, follower, "tidemark.broker.v1.BrokerService/Produce",
		fmt.Sprintf(`{"topic": %q, "partition": 0, "acks": 1, "records": {"records": [{"value": "eA=="}]}}`, topic))
	expectStatus(t, out, ok, "NOT_LEADER_OR_FOLLOWER", "")
	// The group coordinator: found on any broker, NOT_COORDINATOR (with
	// the coordinator named) from another.
	var found groupv1.FindCoordinatorResponse
	callOK(t, c, e.tc.brokers[0], "tidemark.group.v1.GroupService/FindCoordinator", fmt.Sprintf(`{"key": %q}`, topic), &found)
	coord := found.GetCoordinator()
	callOK(t, c, coord.GetAddress(), "tidemark.group.v1.GroupService/OffsetFetch", fmt.Sprintf(`{"groupId": %q}`, topic), &groupv1.OffsetFetchResponse{})
	out, ok = c.call(t, e.tc.brokers[coord.GetId()%3], "tidemark.group.v1.GroupService/OffsetFetch", fmt.Sprintf(`{"groupId": %q}`, topic))
	expectStatus(t, out, ok, "NOT_COORDINATOR", "")
	out, ok = c.call(t, ctrl, "tidemark.admin.v1.AdminService/CreateTopics",
		fmt.Sprintf(`{"topics": [{"name": %q, "numPartitions": 1}]}`, topic))
	if !ok || !strings.Contains(out, "ERROR_CODE_TOPIC_ALREADY_EXISTS") {
		t.Fatalf("create twice: %s", out)
	}
}

// callOK calls and decodes the JSON answer into out.
func callOK(t testing.TB, c grpcCaller, addr, method, body string, out proto.Message) {
	t.Helper()
	got, ok := c.call(t, addr, method, body)
	if !ok {
		t.Fatalf("%s at %s: %s", method, addr, got)
	}
	decode(t, []byte(got), out)
}

// expectStatus checks an error status in JSON: its ErrorDetail names code
// and, when given, field.
func expectStatus(t testing.TB, out string, ok bool, name, field string) {
	t.Helper()
	if ok {
		t.Fatalf("want %s, got an answer: %s", name, out)
	}
	var st struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"@type"`
			Name  string `json:"name"`
			Field string `json:"field"`
		} `json:"details"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("error status is not JSON: %v: %s", err, out)
	}
	if len(st.Details) != 1 || st.Details[0].Type != "type.googleapis.com/tidemark.common.v1.ErrorDetail" ||
		st.Details[0].Name != name || st.Details[0].Field != field {
		t.Fatalf("want ErrorDetail %s naming field %q: %s", name, field, out)
	}
}

// grpcurl runs the grpcurl binary.
type grpcurl struct{ bin string }

func (g grpcurl) list(t testing.TB, addr string) []string {
	t.Helper()
	out, err := exec.Command(g.bin, "-plaintext", addr, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl list %s: %v: %s", addr, err, out)
	}
	return strings.Fields(string(out))
}

func (g grpcurl) call(t testing.TB, addr, method, body string) (string, bool) {
	t.Helper()
	cmd := exec.Command(g.bin, "-plaintext", "-format-error", "-d", body, addr, method)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("grpcurl: %v", err)
	}
	if err != nil {
		return stdout.String() + stderr.String(), false
	}
	return stdout.String(), true
}

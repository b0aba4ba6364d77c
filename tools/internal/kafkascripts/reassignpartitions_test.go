package kafkascripts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
)

func runReassign(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = ReassignPartitions(args, &out, &errw)
	return code, out.String(), errw.String()
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// reassignSettles runs the script until it prints want and exits 0.
func reassignSettles(t *testing.T, want string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut := runReassign(args...)
		if code == 0 && out == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafka-reassign-partitions.sh %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", strings.Join(args, " "), code, out, errOut, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createWith(t *testing.T, c *clustertest.Cluster, name string, asg [][]int32) {
	t.Helper()
	spec := &adminv1.TopicSpec{Name: name}
	for p, reps := range asg {
		spec.Assignments = append(spec.Assignments, &adminv1.ReplicaAssignment{Partition: int32(p), Replicas: reps})
	}
	resp, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{spec}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create %s: %v %v", name, err, resp)
	}
	// The controller answers once the topic is in etcd; the scripts' first
	// Metadata may go to a broker that has not heard of it yet.
	c.WaitAnnounced(name, int32(len(asg)))
}

// throttleConfigs is every throttle key set on topic rp and brokers 1-4,
// as "topic rp KEY" or "broker N KEY" to its value.
func throttleConfigs(t *testing.T, c *clustertest.Cluster) map[string]string {
	t.Helper()
	req := &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "rp"}}}
	for _, id := range []string{"1", "2", "3", "4"} {
		req.Resources = append(req.Resources, &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: id})
	}
	resp, err := c.Admin().DescribeConfigs(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range resp.GetResults() {
		kind := "topic"
		if r.GetResource().GetType() == adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER {
			kind = "broker"
		}
		for _, e := range r.GetEntries() {
			switch {
			case !slices.Contains([]string{leaderRateKey, followerRateKey, leaderReplicasKey, followerReplicasKey}, e.GetName()),
				e.GetSource() != adminv1.ConfigSource_CONFIG_SOURCE_TOPIC && e.GetSource() != adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER:
				continue
			}
			out[kind+" "+r.GetResource().GetName()+" "+e.GetName()] = e.GetValue()
		}
	}
	return out
}

// Bad command lines and bad files are refused before any connection, with
// Kafka's messages and exit code 1.
func TestReassignPartitionsScriptRefusesBadInput(t *testing.T) {
	b := "127.0.0.1:1" // never dialled
	malformed := writeFile(t, "bad.json", `{"version":1,"partitions":[{"topic":"t","partition":0,`)
	dupPart := writeFile(t, "dup.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},{"topic":"t","partition":0,"replicas":[2,3]}]}`)
	dupRep := writeFile(t, "duprep.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}`)
	empty := writeFile(t, "empty.json", `{"version":1,"partitions":[]}`)
	noReps := writeFile(t, "noreps.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`)
	logDir := writeFile(t, "logdir.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data/a"]}]}`)
	logDirs := writeFile(t, "logdirs.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`)
	version := writeFile(t, "v2.json", `{"version":2,"partitions":[]}`)
	topicsDup := writeFile(t, "topics.json", `{"version":1,"topics":[{"topic":"a"},{"topic":"a"}]}`)
	for _, c := range []struct {
		args       []string
		stdout     string // exact, when set
		stderrHead string // prefix of stderr, when set
	}{
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", malformed}, stdout: "Error: " + malformed + " is not a valid reassignment JSON file: unexpected EOF\n"},
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", dupPart}, stdout: "Error: Partition reassignment contains duplicate topic partitions: t-0\n"},
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", dupRep}, stdout: "Error: Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1\n"},
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", empty}, stdout: "Error: Partition reassignment list cannot be empty\n"},
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", noReps}, stdout: "Error: Partition replica list cannot be empty\n"},
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", logDirs}, stdout: "Error: Size of replicas list [1, 2] is different from size of log dirs list [any] for partition t-0\n"},
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", logDir}, stdout: "Error: log dir \"/data/a\" for partition t-0: tidemark brokers have no log dir moves, only \"any\" is supported\n"},
		{args: []string{"--bootstrap-server", b, "--verify", "--reassignment-json-file", version}, stdout: "Error: Not supported version field value 2\n"},
		{args: []string{"--bootstrap-server", b, "--generate", "--topics-to-move-json-file", topicsDup, "--broker-list", "1,2"}, stdout: "Error: List of topics to reassign contains duplicate entries: [a]\n"},
		{args: []string{"--bootstrap-server", b, "--generate", "--topics-to-move-json-file", topicsDup, "--broker-list", "1,1"}, stdout: "Error: Broker list contains duplicate entries: [1]\n"},
		{args: []string{"--bootstrap-server", b, "--list", "--verify"}, stderrHead: "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list\n"},
		{args: []string{"--bootstrap-server", b}, stderrHead: "Command must include exactly one action"},
		{args: []string{"--list"}, stderrHead: "Please specify either --bootstrap-server or --bootstrap-controller\n"},
		{args: []string{"--bootstrap-controller", b, "--list"}, stderrHead: "--bootstrap-controller is not supported"},
		{args: []string{"--bootstrap-server", b, "--execute"}, stderrHead: "Missing required argument \"[reassignment-json-file]\"\n"},
		{args: []string{"--bootstrap-server", b, "--verify", "--reassignment-json-file", dupPart, "--throttle", "10"}, stderrHead: "Option \"[throttle]\" can't be used with action \"[verify]\"\n"},
		{args: []string{"--bootstrap-server", b, "--execute", "--reassignment-json-file", dupPart, "--replica-alter-log-dirs-throttle", "10"}, stderrHead: "--replica-alter-log-dirs-throttle is not supported"},
	} {
		code, out, errOut := runReassign(c.args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1 (stdout %q, stderr %q)", c.args, code, out, errOut)
		}
		if c.stdout != "" && out != c.stdout {
			t.Errorf("%v: stdout %q, want %q", c.args, out, c.stdout)
		}
		if c.stderrHead != "" && !strings.HasPrefix(errOut, c.stderrHead) {
			t.Errorf("%v: stderr %q, want it to begin %q", c.args, errOut, c.stderrHead)
		}
	}
}

// --generate, --execute and --verify of a completed move, then the cluster's
// refusals (unknown topic, partition and broker).
func TestReassignPartitionsScriptGenerateExecuteVerify(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 4, Kafka: true})
	b := strings.Join(c.KafkaAddrs(), ",")
	createWith(t, c, "rp", [][]int32{{1, 2, 3}, {2, 3, 1}})
	current := `{"version":1,"partitions":[{"topic":"rp","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]},` +
		`{"topic":"rp","partition":1,"replicas":[2,3,1],"log_dirs":["any","any","any"]}]}`

	topicsFile := writeFile(t, "topics.json", `{"version":1,"topics":[{"topic":"rp"}]}`)
	code, out, errOut := runReassign("--bootstrap-server", b, "--generate", "--topics-to-move-json-file", topicsFile, "--broker-list", "2,3,4")
	head := "Current partition replica assignment\n" + current + "\n\nProposed partition reassignment configuration\n"
	if code != 0 || !strings.HasPrefix(out, head) {
		t.Fatalf("generate: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var proposed struct {
		Version    int `json:"version"`
		Partitions []struct {
			Topic     string   `json:"topic"`
			Partition int32    `json:"partition"`
			Replicas  []int32  `json:"replicas"`
			LogDirs   []string `json:"log_dirs"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(out, head)), &proposed); err != nil || proposed.Version != 1 || len(proposed.Partitions) != 2 {
		t.Fatalf("proposed %q: %v", strings.TrimPrefix(out, head), err)
	}
	for i, p := range proposed.Partitions {
		sorted := slices.Sorted(slices.Values(p.Replicas))
		if p.Topic != "rp" || p.Partition != int32(i) || !slices.Equal(sorted, []int32{2, 3, 4}) || len(p.LogDirs) != 3 {
			t.Errorf("proposed %+v: want rp-%d on 2,3,4", p, i)
		}
	}

	plan := writeFile(t, "plan.json", `{"version":1,"partitions":[{"topic":"rp","partition":1,"replicas":[3,4,2]},{"topic":"rp","partition":0,"replicas":[2,3,4],"log_dirs":["any","any","any"]}]}`)
	code, out, errOut = runReassign("--bootstrap-server", b, "--execute", "--reassignment-json-file", plan, "--throttle", "50000000")
	want := "Current partition replica assignment\n\n" + current + "\n\nSave this to use as the --reassignment-json-file option during rollback\n" +
		"Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n" +
		"The inter-broker throttle limit was set to 50000000 B/s\n" +
		"Successfully started partition reassignments for rp-0,rp-1\n"
	if code != 0 || out != want {
		t.Fatalf("execute: exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, out, errOut, want)
	}
	// Kafka's throttle: the sources lead-throttled, the new replica
	// follower-throttled, the rate on every broker involved.
	throttles := map[string]string{"topic rp " + leaderReplicasKey: "0:1,0:2,0:3,1:1,1:2,1:3", "topic rp " + followerReplicasKey: "0:4,1:4"}
	for _, id := range []string{"1", "2", "3", "4"} {
		throttles["broker "+id+" "+leaderRateKey], throttles["broker "+id+" "+followerRateKey] = "50000000", "50000000"
	}
	if got := throttleConfigs(t, c); !maps.Equal(got, throttles) {
		t.Errorf("throttles after --execute --throttle: %v, want %v", got, throttles)
	}
	reassignSettles(t, "Status of partition reassignment:\nReassignment of partition rp-0 is completed.\nReassignment of partition rp-1 is completed.\n\n"+
		"Clearing broker-level throttles on brokers 1,2,3,4\nClearing topic-level throttles on topic rp\n",
		"--bootstrap-server", b, "--verify", "--reassignment-json-file", plan)
	reassignSettles(t, "No partition reassignments found.\n", "--bootstrap-server", b, "--list")
	if got := throttleConfigs(t, c); len(got) != 0 {
		t.Errorf("throttles after --verify: %v", got)
	}

	for _, bad := range []struct{ plan, want string }{
		{`{"partitions":[{"topic":"ghost","partition":0,"replicas":[1,2]}]}`, "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic ghost not found.\n"},
		{`{"partitions":[{"topic":"rp","partition":7,"replicas":[1,2]}]}`, "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Unable to find partition: rp-7\n"},
		{`{"partitions":[{"topic":"rp","partition":0,"replicas":[1,9]}]}`, "Error: Unknown broker id 9\n"},
	} {
		code, out, errOut := runReassign("--bootstrap-server", b, "--execute", "--reassignment-json-file", writeFile(t, "bad.json", bad.plan))
		if code != 1 || out != bad.want {
			t.Errorf("execute %s: exit %d, stdout %q (stderr %q), want exit 1 and %q", bad.plan, code, out, errOut, bad.want)
		}
	}
	code, out, _ = runReassign("--bootstrap-server", b, "--verify", "--reassignment-json-file", writeFile(t, "other.json", `{"partitions":[{"topic":"rp","partition":0,"replicas":[1,2,3]}]}`))
	if code != 0 || !strings.Contains(out, "There is no active reassignment of partition rp-0, but replica set is 2,3,4 rather than 1,2,3.\n") {
		t.Errorf("verify of another target: exit %d, stdout %q", code, out)
	}
}

// A move held in flight by a follower throttle: --list, kafka-topics.sh
// --describe's Adding/Removing Replicas columns and its replication
// factor and under-replicated filter as Kafka's (the origin's count), a
// second --execute refused without --additional, --verify in progress,
// then --cancel.
func TestReassignPartitionsScriptInFlightListDescribeCancel(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 4, Kafka: true, BrokerSettings: map[string]string{"replica.fetch.max.bytes": "1024"}})
	b := strings.Join(c.KafkaAddrs(), ",")
	createWith(t, c, "slow", [][]int32{{1, 2, 3}})
	for i := range 400 {
		if _, err := c.Produce(context.Background(), "slow", 0, -1, fmt.Sprintf("value-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// 200 bytes/s into broker 4 for slow-0: the copy takes minutes.
	resp, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{
		{Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: "4"},
			Ops: []*adminv1.ConfigOp{{Name: followerRateKey, Value: "200", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}},
		{Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "slow"},
			Ops: []*adminv1.ConfigOp{{Name: followerReplicasKey, Value: "0:4", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}},
	}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 || resp.GetResults()[1].GetErrorCode() != 0 {
		t.Fatalf("throttle: %v %v", err, resp)
	}
	plan := writeFile(t, "plan.json", `{"version":1,"partitions":[{"topic":"slow","partition":0,"replicas":[2,3,4]}]}`)
	if code, out, errOut := runReassign("--bootstrap-server", b, "--execute", "--reassignment-json-file", plan); code != 0 ||
		!strings.HasSuffix(out, "Successfully started partition reassignment for slow-0\n") {
		t.Fatalf("execute: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	reassignSettles(t, "Current partition reassignments:\nslow-0: replicas: 2,3,4,1. adding: 4. removing: 1.\n", "--bootstrap-server", b, "--list")
	isr := joinIDs(c.Partition("slow", 0).GetIsr(), ",")
	settles(t, "Topic: slow\tTopicId: "+topicID(t, c.KafkaAddrs()[0], "slow")+"\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: "+followerReplicasKey+"=0:4\n"+
		"\tTopic: slow\tPartition: 0\tLeader: 1\tReplicas: 2,3,4,1\tIsr: "+isr+"\tAdding Replicas: 4\tRemoving Replicas: 1\n",
		"--bootstrap-server", b, "--describe", "--topic", "slow")
	// Three of the origin's three replicas in sync: not under-replicated
	// during the move (Kafka's replication factor leaves out adding ones).
	if code, out, _ := runTopics("--bootstrap-server", b, "--describe", "--topic", "slow", "--under-replicated-partitions"); code != 0 || out != "" {
		t.Errorf("under-replicated during the move: exit %d, stdout %q", code, out)
	}

	code, out, _ := runReassign("--bootstrap-server", b, "--execute", "--reassignment-json-file", plan)
	if code != 1 || !strings.HasPrefix(out, "Cannot execute because there is an existing partition assignment.  Use --additional") {
		t.Errorf("a second execute: exit %d, stdout %q", code, out)
	}
	if code, out, _ := runReassign("--bootstrap-server", b, "--verify", "--reassignment-json-file", plan); code != 0 ||
		out != "Status of partition reassignment:\nReassignment of partition slow-0 is still in progress.\n\n" {
		t.Errorf("verify in flight: exit %d, stdout %q", code, out)
	}

	code, out, errOut := runReassign("--bootstrap-server", b, "--cancel", "--reassignment-json-file", plan)
	want := "Successfully cancelled partition reassignment for: slow-0\nNone of the specified partition moves are active." +
		"Clearing broker-level throttles on brokers 1,2,3,4\nClearing topic-level throttles on topic slow\n"
	if code != 0 || out != want {
		t.Fatalf("cancel: exit %d\nstdout:\n%q\nstderr:\n%s\nwant:\n%q", code, out, errOut, want)
	}
	reassignSettles(t, "No partition reassignments found.\n", "--bootstrap-server", b, "--list")
	// As in Kafka, the origin comes back in the moving set's order.
	c.WaitFor(20*time.Second, "slow-0 back on 2,3,1", func() bool {
		p := c.Partition("slow", 0)
		return slices.Equal(p.GetReplicas(), []int32{2, 3, 1}) && len(p.GetAddingReplicas()) == 0
	})
	code, out, _ = runReassign("--bootstrap-server", b, "--cancel", "--reassignment-json-file", plan, "--preserve-throttles")
	if code != 0 || out != "None of the specified partition reassignments are active.\nNone of the specified partition moves are active." {
		t.Errorf("cancel with nothing moving: exit %d, stdout %q", code, out)
	}
}

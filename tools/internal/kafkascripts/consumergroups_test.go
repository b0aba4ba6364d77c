package kafkascripts

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
)

func runGroups(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = ConsumerGroups(args, &out, &errw)
	return code, out.String(), errw.String()
}

// groupsSettle runs kafka-consumer-groups.sh until it prints want on
// stdout and exits 0 (a group settles a moment after its members move).
func groupsSettle(t *testing.T, want string, args ...string) (stderr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut := runGroups(args...)
		if code == 0 && out == want {
			return errOut
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafka-consumer-groups.sh %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", strings.Join(args, " "), code, out, errOut, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sameLines compares output line by line, naming the first that differs.
func sameLines(t *testing.T, what, got, want string) {
	t.Helper()
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s: line %d is %q, want %q\nwhole output:\n%s", what, i+1, gl, wl, got)
		}
	}
}

// committed is the group's committed offsets, read with an OffsetFetch of
// the test's own.
func committed(t *testing.T, cl *kgo.Client, group string) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("offset fetch %s: %v %+v", group, err, resp)
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// A real group: a kgo member reads orders (10 records in partition 0, 6 in
// 1), commits 7 and 4, and stays; then leaves. The script describes it in
// each view, lists it, refuses to reset it while the member is there,
// resets it once it is empty (a dry run changes nothing, --execute does),
// deletes offsets, then the group.
func TestConsumerGroupsScript(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true,
		BrokerSettings:   map[string]string{"group.min.session.timeout.ms": "100", "group.initial.rebalance.delay.ms": "0"},
		AdjustController: func(cfg *controller.Config) { cfg.OffsetsTopicNumPartitions = 3 }})
	b := strings.Join(c.KafkaAddrs(), ",")
	c.CreateTopic("orders", 2, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for p, n := range []int{10, 6} {
		for i := range n {
			if _, err := c.Produce(ctx, "orders", int32(p), -1, fmt.Sprintf("r%d-%d", p, i)); err != nil {
				t.Fatal(err)
			}
		}
	}

	member, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ClientID("reader-1"), kgo.ConsumerGroup("readers"),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	for read := 0; read < 16; {
		fs := member.PollRecords(ctx, 16-read)
		if ctx.Err() != nil {
			t.Fatalf("%d of 16 records read", read)
		}
		read += len(fs.Records())
	}
	var commitErr error
	member.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 7}, 1: {Epoch: -1, Offset: 4}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	memberID, _ := member.GroupMetadata()
	checker, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer checker.Close()
	idW := max(15, len(memberID))
	pad := func(s string, w int) string { return s + strings.Repeat(" ", w-len(s)) }

	// The active member's view.
	stable := "\n" +
		"GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             " + pad("CONSUMER-ID", idW) + " HOST            CLIENT-ID\n" +
		"readers         orders          0          7               10              3               " + pad(memberID, idW) + " /127.0.0.1      reader-1\n" +
		"readers         orders          1          4               6               2               " + pad(memberID, idW) + " /127.0.0.1      reader-1\n"
	errOut := groupsSettle(t, stable, "--bootstrap-server", b, "--describe", "--group", "readers")
	if errOut != "" {
		t.Fatalf("describe of a stable group wrote %q on stderr", errOut)
	}
	_, out, _ := runGroups("--bootstrap-server", b, "--describe", "--group", "readers", "--offsets")
	sameLines(t, "--offsets", out, stable)
	_, out, _ = runGroups("--bootstrap-server", b, "--describe", "--group", "readers", "--members")
	sameLines(t, "--members", out, "\n"+
		"GROUP           "+pad("CONSUMER-ID", idW)+" HOST            CLIENT-ID       #PARTITIONS     \n"+
		"readers         "+pad(memberID, idW)+" /127.0.0.1      reader-1        2               \n")
	_, out, _ = runGroups("--bootstrap-server", b, "--describe", "--group", "readers", "--members", "--verbose")
	sameLines(t, "--members --verbose", out, "\n"+
		"GROUP           "+pad("CONSUMER-ID", idW)+" HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT\n"+
		"readers         "+pad(memberID, idW)+" /127.0.0.1      reader-1        2               orders(0,1)\n")
	code, out, _ := runGroups("--bootstrap-server", b, "--describe", "--group", "readers", "--state")
	if code != 0 || !strings.HasPrefix(out, "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS\nreaders                   127.0.0.1:") ||
		!strings.HasSuffix(out, " cooperative-sticky   Stable          1\n") {
		t.Fatalf("--state: exit %d, stdout %q", code, out)
	}
	sameLines(t, "--list --state", groupsSettleOut(t, b, "--list", "--state"), "GROUP           STATE\nreaders         Stable\n")

	// Refused while the member is there.
	code, out, errOut = runGroups("--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--all-topics", "--to-earliest", "--execute")
	sameLines(t, "reset of an active group", out, "\n"+
		"Error: Assignments can only be reset if the group 'readers' is inactive, but the current state is Stable.\n"+
		"\n"+
		"GROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n")
	if code != 0 || errOut != "" {
		t.Fatalf("reset of an active group: exit %d, stderr %q", code, errOut)
	}
	_, out, _ = runGroups("--bootstrap-server", b, "--delete", "--group", "readers")
	sameLines(t, "delete of an active group", out, "\n"+
		"Error: Deletion of some consumer groups failed:\n"+
		"* Group 'readers' could not be deleted due to: java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n")

	// The member leaves: the group is empty, its offsets stay.
	member.Close()
	empty := "\n" +
		"GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\n" +
		"readers         orders          0          7               10              3               -               -               -\n" +
		"readers         orders          1          4               6               2               -               -               -\n"
	errOut = groupsSettle(t, empty, "--bootstrap-server", b, "--describe", "--all-groups")
	sameLines(t, "describe's stderr for an empty group", errOut, "\nConsumer group 'readers' has no active members.\n")
	groupsSettle(t, "readers\n", "--bootstrap-server", b, "--list")
	groupsSettle(t, "GROUP           STATE\nreaders         Empty\n", "--bootstrap-server", b, "--list", "--state", "empty,stable")
	groupsSettle(t, "GROUP           STATE\n", "--bootstrap-server", b, "--list", "--state", "PreparingRebalance")
	code, out, errOut = runGroups("--bootstrap-server", b, "--describe", "--group", "readers", "--members")
	if code != 0 || out != "" || errOut != "\nConsumer group 'readers' has no active members.\n" {
		t.Fatalf("--members of an empty group: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A dry run (the default, with Kafka's warning) plans and changes nothing.
	planned := "\n" +
		"GROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n" +
		"readers                        orders                         0          0              \n" +
		"readers                        orders                         1          0              \n"
	code, out, errOut = runGroups("--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--all-topics", "--to-earliest")
	sameLines(t, "dry run", out, planned)
	if code != 0 || !strings.HasPrefix(errOut, "WARN: No action will be performed as the --execute option is missing.In a future major release,") {
		t.Fatalf("dry run: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := runGroups("--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--topic", "orders", "--to-earliest", "--dry-run"); code != 0 || out != planned || errOut != "" {
		t.Fatalf("--dry-run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := committed(t, checker, "readers"); got[0] != 7 || got[1] != 4 {
		t.Fatalf("a dry run changed the offsets: %v", got)
	}

	// --execute commits them.
	for _, step := range []struct {
		args []string
		want map[int32]int64
		rows string
	}{
		{[]string{"--topic", "orders:0", "--to-offset", "5"}, map[int32]int64{0: 5, 1: 4}, "readers                        orders                         0          5              \n"},
		{[]string{"--all-topics", "--shift-by", "-2"}, map[int32]int64{0: 3, 1: 2},
			"readers                        orders                         0          3              \n" +
				"readers                        orders                         1          2              \n"},
		{[]string{"--topic", "orders", "--to-latest"}, map[int32]int64{0: 10, 1: 6},
			"readers                        orders                         0          10             \n" +
				"readers                        orders                         1          6              \n"},
		// Past the end: the end, with Kafka's warning.
		{[]string{"--topic", "orders:1", "--to-offset", "100"}, map[int32]int64{0: 10, 1: 6}, "readers                        orders                         1          6              \n"},
		{[]string{"--all-topics", "--to-datetime", "2000-01-01T00:00:00.000"}, map[int32]int64{0: 0, 1: 0},
			"readers                        orders                         0          0              \n" +
				"readers                        orders                         1          0              \n"},
		{[]string{"--all-topics", "--to-current"}, map[int32]int64{0: 0, 1: 0},
			"readers                        orders                         0          0              \n" +
				"readers                        orders                         1          0              \n"},
	} {
		args := append([]string{"--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--execute"}, step.args...)
		code, out, _ := runGroups(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d, stdout %q", step.args, code, out)
		}
		sameLines(t, strings.Join(step.args, " "), out, "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n"+step.rows)
		if got := committed(t, checker, "readers"); got[0] != step.want[0] || got[1] != step.want[1] {
			t.Fatalf("%q committed %v, want %v", step.args, got, step.want)
		}
	}
	plan := filepath.Join(t.TempDir(), "plan.csv")
	if err := os.WriteFile(plan, []byte("orders,0,8\norders,1,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runGroups("--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--from-file", plan, "--execute"); code != 0 {
		t.Fatalf("--from-file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := committed(t, checker, "readers"); got[0] != 8 || got[1] != 1 {
		t.Fatalf("--from-file committed %v", got)
	}

	// By duration (every record is newer than an hour), and as CSV.
	_, out, _ = runGroups("--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--topic", "orders:1", "--by-duration", "PT1H", "--dry-run")
	sameLines(t, "--by-duration", out, "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n"+
		"readers                        orders                         1          0              \n")
	if code, out, _ := runGroups("--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--topic", "orders:0", "--to-offset", "2", "--dry-run", "--export"); code != 0 || out != "orders,0,2\n\n" {
		t.Fatalf("--export: exit %d, stdout %q", code, out)
	}

	// Offsets of one partition, then the group.
	code, out, errOut = runGroups("--bootstrap-server", b, "--delete-offsets", "--group", "readers", "--topic", "orders:1")
	if code != 0 || errOut != "" {
		t.Fatalf("--delete-offsets: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	sameLines(t, "--delete-offsets", out, "Request succeed for deleting offsets with topic orders:1 group readers\n"+
		"\n"+
		"TOPIC                          PARTITION       STATUS         \n"+
		"orders                         1               Successful     \n")
	if got := committed(t, checker, "readers"); got[0] != 8 || len(got) != 1 {
		t.Fatalf("after --delete-offsets: %v", got)
	}
	code, out, errOut = runGroups("--bootstrap-server", b, "--reset-offsets", "--group", "readers", "--topic", "orders:1", "--shift-by", "1")
	if code != 1 || out != "" || !strings.Contains(errOut, "Cannot shift offset for partition orders-1 since there is no current committed offset\n") {
		t.Fatalf("--shift-by without a committed offset: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ := runGroups("--bootstrap-server", b, "--delete", "--group", "readers"); code != 0 || out != "Deletion of requested consumer groups ('readers') was successful.\n" {
		t.Fatalf("delete: exit %d, stdout %q", code, out)
	}
	groupsSettle(t, "", "--bootstrap-server", b, "--list")

	// Unknown groups, as Kafka's tool prints them.
	for _, view := range [][]string{nil, {"--members"}, {"--state"}} {
		args := append([]string{"--bootstrap-server", b, "--describe", "--group", "readers"}, view...)
		if code, out, _ := runGroups(args...); code != 0 || out != "\nError: Consumer group 'readers' does not exist.\n" {
			t.Errorf("%q of a deleted group: exit %d, stdout %q", view, code, out)
		}
	}
}

// groupsSettleOut is the stdout of a run that exits 0 with some output.
func groupsSettleOut(t *testing.T, b string, args ...string) string {
	t.Helper()
	code, out, errOut := runGroups(append([]string{"--bootstrap-server", b}, args...)...)
	if code != 0 {
		t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
	}
	return out
}

// Kafka's refusals of bad command lines, before any connection: the
// message and the usage on stderr, exit 1.
func TestConsumerGroupsScriptRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, or reset consumer group offsets.\n"},
		{[]string{"--list"}, "Missing required argument \"[bootstrap-server]\"\n"},
		{[]string{"--bootstrap-server", "x:1", "--group", "g"}, "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets\n"},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--delete", "--all-groups"}, "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets\n"},
		{[]string{"--bootstrap-server", "x:1", "--describe"}, "Option [describe] takes one of these options: [group], [all-groups]\n"},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--group", "g", "--members", "--state"}, "Option [describe] takes at most one of these options: [members], [offsets], [state]\n"},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--group", "g", "--state", "stable"}, "Option [describe] does not take a value for [state]\n"},
		{[]string{"--bootstrap-server", "x:1", "--list", "--members"}, "Option(s) [members] are unavailable given other options on the command line\n"},
		{[]string{"--bootstrap-server", "x:1", "--delete", "--group", "g", "--topic", "t"}, "The consumer does not support topic-specific offset deletion from a consumer group.\n"},
		{[]string{"--bootstrap-server", "x:1", "--delete-offsets", "--group", "g"}, "Option [delete-offsets] takes the following options: [group], [topic]\n"},
		{[]string{"--bootstrap-server", "x:1", "--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run", "--execute"}, "Option [reset-offsets] only accepts one of [execute] and [dry-run]\n"},
		{[]string{"--bootstrap-server", "x:1", "--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest", "--execute"}, "Option \"[to-earliest]\" can't be used with option \"[to-latest]\"\n"},
		{[]string{"--bootstrap-server", "x:1", "--reset-offsets", "--group", "g", "--to-earliest", "--execute"}, "One of the reset scopes should be defined: --all-topics, --topic.\n"},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--group", "g", "--all-groups"}, "Option \"[group]\" can't be used with option \"[all-groups]\"\n"},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--group", "g", "--topic", "t"}, "Option \"[topic]\" can't be used with option \"[describe]\"\n"},
		{[]string{"--bootstrap-server", "x:1", "--list", "--frobnicate"}, "frobnicate is not a recognized option\n"},
		{[]string{"--bootstrap-server", "x:1", "--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "ten"}, "Cannot parse argument 'ten' of option to-offset\n"},
	} {
		code, out, errOut := runGroups(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", tc.args, code, out, errOut, tc.want)
			continue
		}
		if !strings.Contains(errOut, "--bootstrap-server string") {
			t.Errorf("%q: no usage after the message: %q", tc.args, errOut)
		}
	}
	// A bad --state list is refused the same way, once connected.
	code, out, errOut := runGroups("--bootstrap-server", "127.0.0.1:1", "--list", "--state", "stable,asleep")
	if want := "Invalid state list 'stable,asleep'. Valid states are: PreparingRebalance, CompletingRebalance, Stable, Dead, Empty, Assigning, Reconciling\n"; code != 1 || out != "" || !strings.HasPrefix(errOut, want) {
		t.Errorf("bad --state: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A bootstrap server nobody listens on: Kafka's failure line naming it,
// not a hang.
func TestConsumerGroupsScriptUnreachableBootstrap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, out, _ := runGroups("--bootstrap-server", addr, "--list", "--timeout", "500")
	if want := "\nError: Executing consumer group command failed due to ListGroups (bootstrap server " + addr + "): "; code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("exit %d, stdout %q, want exit 0 and %q...", code, out, want)
	}
}

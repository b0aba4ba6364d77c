package client_test

import (
	"errors"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
)

func newAdmin(t *testing.T, addrs []string) *client.Admin {
	t.Helper()
	a, err := client.NewAdmin(addrs, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func TestAdminFollowsNotController(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 3, Controllers: 3})
	ctls := fc.ControllerAddrs()
	fc.SetActiveController(2)
	ctx := testCtx(t, 5*time.Second)

	// Only a standby is known; its NOT_CONTROLLER names the active one.
	a := newAdmin(t, ctls[:1])
	res, err := a.CreateTopic(ctx, &adminv1.TopicSpec{Name: "t", NumPartitions: 2, ReplicationFactor: 3})
	if err != nil || res.GetNumPartitions() != 2 {
		t.Fatalf("create: %+v %v", res, err)
	}
	if a.ActiveController() != ctls[2] || fc.NodeCalls(1001, "CreateTopics") != 1 || fc.NodeCalls(1003, "CreateTopics") != 1 {
		t.Fatalf("active %s; calls %d on the standby, %d on the active", a.ActiveController(),
			fc.NodeCalls(1001, "CreateTopics"), fc.NodeCalls(1003, "CreateTopics"))
	}

	// Per-item errors come back as *kerr.Error.
	_, err = a.CreateTopic(ctx, &adminv1.TopicSpec{Name: "t"})
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Code != kerr.TopicAlreadyExists {
		t.Fatalf("second create: %v", err)
	}

	// The active controller moves: the old one names the new one.
	fc.SetActiveController(1)
	desc, err := a.DescribeCluster(ctx)
	if err != nil || desc.GetController().GetAddress() != ctls[1] || a.ActiveController() != ctls[1] {
		t.Fatalf("after the move: %v, active %s", err, a.ActiveController())
	}

	// Without hints, the admin goes round the addresses it was given.
	fc.SetControllerHints(false)
	fc.SetActiveController(0)
	all := newAdmin(t, []string{ctls[2], ctls[1], ctls[0]})
	topics, err := all.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: []string{"t"}})
	if err != nil || len(topics.GetTopics()) != 1 || len(topics.GetTopics()[0].GetPartitions()) != 2 {
		t.Fatalf("describe without hints: %v %v", topics, err)
	}
	if all.ActiveController() != ctls[0] {
		t.Fatalf("active %s, want %s", all.ActiveController(), ctls[0])
	}

	// A non-retriable answer is returned at once.
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "AlterConfigs" {
			return &fakebroker.Fault{Code: kerr.PolicyViolation}
		}
		return nil
	})
	_, err = all.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{})
	if codeOf(err) != kerr.PolicyViolation || fc.Calls("AlterConfigs") != 1 {
		t.Fatalf("alter configs: %v after %d calls", err, fc.Calls("AlterConfigs"))
	}
}

func TestAdminConfigsAndElections(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2, Controllers: 1})
	a := newAdmin(t, fc.ControllerAddrs())
	ctx := testCtx(t, 5*time.Second)
	if _, err := a.CreateTopic(ctx, &adminv1.TopicSpec{Name: "t", ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	topic := &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"}
	if _, err := a.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: topic, Ops: []*adminv1.ConfigOp{{Name: "min.insync.replicas", Value: "2", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}},
	}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := a.DescribeConfigs(ctx, &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{topic}})
	if err != nil || len(cfg.GetResults()[0].GetEntries()) != 1 || cfg.GetResults()[0].GetEntries()[0].GetValue() != "2" {
		t.Fatalf("describe configs: %v %v", cfg, err)
	}
	fc.MoveLeader("t", 0, 2)
	el, err := a.ElectLeaders(ctx, &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: "t", Partition: 0}},
	})
	if err != nil || el.GetResults()[0].GetLeader() != 1 {
		t.Fatalf("elect: %v %v", el, err)
	}
	if err := a.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteTopic(ctx, "t"); codeOf(err) != kerr.UnknownTopicOrPartition {
		t.Fatalf("second delete: %v", err)
	}
}

func TestAdminWatchClusterFollowsActiveController(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Controllers: 2})
	fc.CreateTopic("t", 1)
	ctls := fc.ControllerAddrs()
	a := newAdmin(t, ctls)
	ctx := testCtx(t, 5*time.Second)
	seen := map[string]int{}
	n := 0
	for resp, err := range a.WatchCluster(ctx, &adminv1.WatchClusterRequest{IntervalMs: 10}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetPartitions()) != 1 {
			t.Fatalf("snapshot without the partition: %v", resp)
		}
		seen[resp.GetCluster().GetController().GetAddress()]++
		n++
		if n == 3 {
			fc.SetActiveController(1)
		}
		if seen[ctls[1]] >= 3 {
			break
		}
	}
	if seen[ctls[0]] < 3 || seen[ctls[1]] < 3 {
		t.Fatalf("snapshots per controller: %v", seen)
	}
	// The iterator ends with an error when the context does.
	short := testCtx(t, 50*time.Millisecond)
	var last error
	for _, err := range a.WatchCluster(short, &adminv1.WatchClusterRequest{IntervalMs: 10}) {
		last = err
	}
	if last == nil {
		t.Fatal("watch ended without an error when its context ended")
	}
}

// A stopped active controller keeps its connections open and never
// answers. An attempt that passes the request timeout moves the call on:
// hints still naming the stopped controller are ignored, and the call is
// answered by the standby as soon as it takes office.
func TestAdminPassesOverAControllerThatDoesNotAnswer(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 1, Controllers: 2})
	ctls := fc.ControllerAddrs()
	o := testOptions()
	o.RequestTimeout = 300 * time.Millisecond
	a, err := client.NewAdmin(ctls, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ctx := testCtx(t, 10*time.Second)
	if _, err := a.DescribeCluster(ctx); err != nil || a.ActiveController() != ctls[0] {
		t.Fatalf("describe: %v, active %s", err, a.ActiveController())
	}

	// Controller 1001 freezes; 1002 takes office 700 ms later and names
	// 1001 as active until then.
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Node == 1001 {
			return &fakebroker.Fault{Delay: time.Minute}
		}
		return nil
	})
	takeover := time.AfterFunc(700*time.Millisecond, func() { fc.SetActiveController(1) })
	defer takeover.Stop()
	start := time.Now()
	desc, err := a.DescribeCluster(ctx)
	took := time.Since(start)
	if err != nil || desc.GetController().GetAddress() != ctls[1] || a.ActiveController() != ctls[1] {
		t.Fatalf("describe with the active controller frozen: %v %v, active %s", desc.GetController(), err, a.ActiveController())
	}
	if took > 3*time.Second {
		t.Fatalf("answered after %v, want soon after the standby took office (0.7 s)", took)
	}
	// Later calls go straight to the new controller.
	frozenCalls := fc.NodeCalls(1001, "DescribeTopics")
	if _, err := a.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{}); err != nil || fc.NodeCalls(1001, "DescribeTopics") != frozenCalls {
		t.Fatalf("describe topics: %v; %d calls to the frozen controller", err, fc.NodeCalls(1001, "DescribeTopics")-frozenCalls)
	}
}

// A watch on a controller that stops sending (frozen) is given up after the
// interval plus the request timeout, and moves to the standby once it takes
// office, rather than staying silent until the frozen one resumes.
func TestAdminWatchLeavesASilentController(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Controllers: 2})
	fc.CreateTopic("t", 1)
	ctls := fc.ControllerAddrs()
	o := testOptions()
	o.RequestTimeout = 300 * time.Millisecond
	a, err := client.NewAdmin(ctls, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ctx := testCtx(t, 10*time.Second)
	n := 0
	var frozenAt time.Time
	for resp, err := range a.WatchCluster(ctx, &adminv1.WatchClusterRequest{IntervalMs: 50}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 2 {
			// Controller 1001 freezes; 1002 takes office 500 ms later.
			fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
				if call.Node == 1001 {
					return &fakebroker.Fault{Delay: time.Minute}
				}
				return nil
			})
			frozenAt = time.Now()
			takeover := time.AfterFunc(500*time.Millisecond, func() { fc.SetActiveController(1) })
			defer takeover.Stop()
		}
		if resp.GetCluster().GetController().GetAddress() == ctls[1] {
			if took := time.Since(frozenAt); took > 3*time.Second {
				t.Fatalf("the watch reached the new controller %v after the old one froze", took)
			}
			return
		}
	}
	t.Fatal("the watch ended before reaching the new controller")
}

package controller

import (
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// TestPausedControllerIsFenced stalls the active controller (its event loop
// and its outgoing requests, as a paused process) and cuts its etcd traffic
// past its lease. The standby takes over with epoch 2. When the zombie
// resumes, the requests it had in flight are refused by brokers that saw
// epoch 2 (STALE_CONTROLLER_EPOCH), its next etcd write is refused by the
// fence, and it steps down without changing anything.
func TestPausedControllerIsFenced(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c2 := c.startController(2)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 2, 3}}, nil)
	zombie := c1.office.current()

	// Requests the zombie sends from now on stay in flight.
	releaseSenders := zombie.HoldSendersForTest()
	defer releaseSenders()
	alter := func(ctl *testController, v string) (*adminv1.AlterConfigsResponse, error) {
		return c.admin(ctl).AlterConfigs(ctx(t), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
			Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"},
			Ops:      []*adminv1.ConfigOp{{Name: "retention.ms", Value: v, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}},
		}}})
	}
	if resp, err := alter(c1, "1000"); err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter before the pause: %v %v", resp, err)
	}

	// Pause the process: its loop stops, its etcd connection hangs.
	releaseLoop, ok := zombie.StallForTest()
	if !ok {
		t.Fatal("zombie ended before the stall")
	}
	defer releaseLoop()
	c1.bridge.Pause()
	type answer struct {
		resp *adminv1.AlterConfigsResponse
		err  error
	}
	late := make(chan answer, 1)
	go func() {
		resp, err := alter(c1, "2000") // queued behind the stall
		late <- answer{resp, err}
	}()
	time.Sleep(50 * time.Millisecond)

	if e := c.waitActive(c2, ctrlTTL+3*time.Second); e != 2 {
		t.Fatalf("standby epoch = %d, want 2", e)
	}
	eventually(t, 10*time.Second, "brokers saw controller epoch 2", func() bool {
		for _, b := range c.brokers {
			if b.seenControllerEpoch() != 2 {
				return false
			}
		}
		return true
	})

	// Resume: first the requests in flight, then the loop.
	c1.bridge.Resume()
	releaseSenders()
	eventually(t, 10*time.Second, "brokers refused the zombie's epoch-1 requests", func() bool {
		for _, b := range c.brokers {
			if !slices.Contains(b.staleRejections(), 1) {
				return false
			}
		}
		return true
	})
	releaseLoop()
	var got answer
	select {
	case got = <-late:
	case <-time.After(5 * time.Second):
		t.Fatal("the zombie never answered the queued request")
	}
	if d := detail(t, got.err); d.Code != kerr.NotController || d.Controller == nil || d.Controller.ID != 2 {
		t.Fatalf("zombie's answer = %+v, want NOT_CONTROLLER naming controller 2", d)
	}
	eventually(t, 10*time.Second, "zombie stepped down", func() bool { _, ok := c1.Active(); return !ok })
	if c.logs.count("node=1", "fenced write refused") == 0 || c.logs.count("node=1", "Controller moved") == 0 {
		t.Error("the zombie did not log its fencing")
	}
	cfg, err := c.store.TopicConfig(ctx(t), "t")
	if err != nil || cfg["retention.ms"] != "1000" {
		t.Fatalf("topic config after the zombie = %v, %v; its write must not land", cfg, err)
	}
	if e, ok := c2.Active(); !ok || e != 2 {
		t.Fatalf("controller 2 = %d, %v; want still active at epoch 2", e, ok)
	}
	for id, b := range c.brokers {
		if e := b.seenControllerEpoch(); e != 2 {
			t.Errorf("broker %d saw controller epoch %d after the zombie resumed", id, e)
		}
	}
	// The deposed controller is a standby again and says so.
	_, err = c.admin(c1).DescribeCluster(ctx(t), &adminv1.DescribeClusterRequest{})
	if d := detail(t, err); d.Code != kerr.NotController || d.Controller == nil || d.Controller.ID != 2 {
		t.Fatalf("deposed controller answers %+v", d)
	}
	if resp, err := alter(c2, "3000"); err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter on the new controller: %v %v", resp, err)
	}
}

package controller

import (
	"context"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/metastore"
)

// Kafka's OfflinePartitionsCount is the active controller's figure: every
// other controller reports 0 (KafkaController.updateMetrics sets it to 0
// when !isActive), so sum(OfflinePartitionsCount) over the controllers is
// the cluster's count. A controller deposed while partitions were offline
// must drop its figure with its ActiveControllerCount.
func TestDeposedControllerReportsNoOfflinePartitions(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c2 := c.startController(2)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "solo", [][]int32{{1}}, nil)
	c.brokers[1].deregister()
	c.waitState("solo", 0, 3*time.Second, "offline", func(s metastore.PartitionState) bool { return s.Leader == -1 })
	eventually(t, 2*time.Second, "offline partition counted on controller 1", func() bool {
		return metric(t, c1, "tidemark_controller_offline_partitions_count") == 1
	})

	// Controller 1 loses etcd past its lease: controller 2 takes over.
	c1.bridge.Pause()
	if e := c.waitActive(c2, ctrlTTL+3*time.Second); e != 2 {
		t.Fatalf("controller 2 epoch = %d, want 2", e)
	}
	eventually(t, 10*time.Second, "controller 1 stepped down", func() bool { _, ok := c1.Active(); return !ok })
	c1.bridge.Resume()
	eventually(t, 2*time.Second, "offline partition counted on controller 2", func() bool {
		return metric(t, c2, "tidemark_controller_offline_partitions_count") == 1
	})
	time.Sleep(500 * time.Millisecond)
	a1 := metric(t, c1, "tidemark_controller_active_controller_count")
	o1 := metric(t, c1, "tidemark_controller_offline_partitions_count")
	o2 := metric(t, c2, "tidemark_controller_offline_partitions_count")
	if a1 != 0 || o1 != 0 {
		t.Fatalf("deposed controller 1: active_controller_count=%v offline_partitions_count=%v (controller 2, active: %v); "+
			"want 0 and 0: summed over the controllers the cluster shows %v offline partitions, not 1", a1, o1, o2, o1+o2)
	}
}

// TestAStuckLoopShowsInTheEventMetrics: an operator sees a controller whose
// loop is stuck inside one event (a paused process, a write that does not
// return) before requests time out: the running event's age grows and the
// queue fills; once it moves on both fall back and the waits are counted.
// A standby reports an empty queue.
func TestAStuckLoopShowsInTheEventMetrics(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c2 := c.startController(2)
	c.startBrokers(c1, 3)
	waited := func() uint64 {
		ms, _ := samples(t, c1, "tidemark_controller_event_queue_seconds")
		var n uint64
		for _, m := range ms {
			n += m.GetHistogram().GetSampleCount()
		}
		return n
	}
	before := waited()
	if before == 0 {
		t.Fatal("no event's wait counted on an active controller")
	}

	release, ok := c1.office.current().StallForTest()
	if !ok {
		t.Fatal("the term ended")
	}
	defer release()
	go func() { _, _ = c.admin(c1).DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{}) }()
	var stuck float64
	eventually(t, 5*time.Second, "the queue filling behind the stuck event", func() bool {
		stuck = metric(t, c1, "tidemark_controller_event_running_seconds")
		return metric(t, c1, "tidemark_controller_event_queue_size") >= 1 && stuck > 0
	})
	eventually(t, 5*time.Second, "the stuck event's age growing", func() bool {
		return metric(t, c1, "tidemark_controller_event_running_seconds") > stuck
	})
	if n := metric(t, c2, "tidemark_controller_event_queue_size"); n != 0 {
		t.Fatalf("standby reports %v queued events", n)
	}
	stalledAt := waited()
	release()
	eventually(t, 5*time.Second, "the queue drained and the loop waiting again", func() bool {
		return metric(t, c1, "tidemark_controller_event_queue_size") == 0 && metric(t, c1, "tidemark_controller_event_running_seconds") == 0
	})
	if after := waited(); after <= stalledAt {
		t.Fatalf("the events queued behind the stall were not counted: %d waits before the release, %d after", stalledAt, after)
	}
}

// Every controller, active or standby, exports how current its copy of the
// ACL bindings in etcd is: when it last applied them and how many it holds.
func TestFollowedBindingsShowInTheMetrics(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c2 := c.startController(2)
	for _, ctl := range []*testController{c1, c2} {
		eventually(t, 5*time.Second, "the bindings' first load", func() bool {
			return metric(t, ctl, "tidemark_etcd_follow_last_applied_timestamp_seconds") > 0
		})
		if v := metric(t, ctl, "tidemark_etcd_follow_entries"); v != 0 {
			t.Fatalf("%v bindings held with none in etcd", v)
		}
	}
	binding := `{"resource_type":"TOPIC","resource_name":"orders","pattern_type":"LITERAL","principal":"User:alice","host":"*","operation":"READ","permission_type":"ALLOW"}`
	if _, err := c.etcd.Client(t).Put(t.Context(), c.store.ACLsPrefix()+"b1", binding); err != nil {
		t.Fatal(err)
	}
	for _, ctl := range []*testController{c1, c2} {
		eventually(t, 5*time.Second, "the binding held", func() bool {
			return metric(t, ctl, "tidemark_etcd_follow_entries") == 1
		})
		if v := labelled(t, ctl, "tidemark_etcd_follow_reloads_total", "state", "acls"); v != 0 {
			t.Fatalf("%v reloads with etcd up", v)
		}
	}
}

// A controller whose loop is busy (a slow etcd write, a paused process)
// when it loses its lease cannot step down until the loop takes the news,
// yet from that moment it is no longer the active controller: it refuses
// requests as a standby (office.current asks whether the lease is surely
// held). Its ActiveControllerCount must say the same, or, once a standby
// has taken over, the controllers report two active controllers, and both
// their offline partition counts, for as long as the loop stays busy.
func TestAControllerThatLostItsLeaseReportsItselfStandbyAtOnce(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c2 := c.startController(2)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "solo", [][]int32{{1}}, nil)
	c.brokers[1].deregister()
	c.waitState("solo", 0, 3*time.Second, "offline", func(s metastore.PartitionState) bool { return s.Leader == -1 })
	eventually(t, 2*time.Second, "offline partition counted on controller 1", func() bool {
		return metric(t, c1, "tidemark_controller_offline_partitions_count") == 1
	})

	// Controller 1's loop is held inside an event and its etcd link goes
	// silent: its lease runs out and controller 2 is elected.
	a1 := c1.office.current()
	release, ok := a1.StallForTest()
	if !ok {
		t.Fatal("the term ended")
	}
	defer release()
	c1.bridge.Pause()
	defer c1.bridge.Resume()
	if e := c.waitActive(c2, ctrlTTL+3*time.Second); e != 2 {
		t.Fatalf("controller 2 epoch = %d, want 2", e)
	}
	eventually(t, 2*time.Second, "offline partition counted on controller 2", func() bool {
		return metric(t, c2, "tidemark_controller_offline_partitions_count") == 1
	})
	if _, ok := c1.Active(); ok {
		t.Fatal("controller 1 still answers as the active controller after controller 2 was elected")
	}
	if a1.Err() != nil {
		t.Fatal("setup: controller 1's term ended although its loop is held")
	}
	active := metric(t, c1, "tidemark_controller_active_controller_count") + metric(t, c2, "tidemark_controller_active_controller_count")
	offline := metric(t, c1, "tidemark_controller_offline_partitions_count") + metric(t, c2, "tidemark_controller_offline_partitions_count")
	if active != 1 || offline != 1 {
		t.Fatalf("summed over the controllers: active_controller_count=%v offline_partitions_count=%v, want 1 and 1 "+
			"(controller 1, whose lease ran out, reports active=%v offline=%v)", active, offline,
			metric(t, c1, "tidemark_controller_active_controller_count"), metric(t, c1, "tidemark_controller_offline_partitions_count"))
	}
	release()
	eventually(t, 5*time.Second, "controller 1's term ended", func() bool { return a1.Err() != nil })
	if v := metric(t, c1, "tidemark_controller_active_controller_count"); v != 0 {
		t.Fatalf("controller 1 reports active_controller_count=%v after its term ended", v)
	}
}

package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest/history"
)

// latestViews keeps the newest PartitionView of each partition a
// WatchCluster stream sent, as a console draws it.
type latestViews struct {
	mu    sync.Mutex
	views map[string]*adminv1.PartitionView
}

func watchViews(t *testing.T, c *Cluster, topics ...string) *latestViews {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.Admin().WatchCluster(ctx, &adminv1.WatchClusterRequest{Topics: topics, IntervalMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	lv := &latestViews{views: map[string]*adminv1.PartitionView{}}
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				return
			}
			lv.mu.Lock()
			clear(lv.views)
			for _, v := range msg.GetPartitions() {
				lv.views[fmt.Sprintf("%s-%d", v.GetTopic(), v.GetPartition())] = v
			}
			lv.mu.Unlock()
		}
	}()
	return lv
}

func (lv *latestViews) of(topic string, p int32) *adminv1.PartitionView {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	return lv.views[fmt.Sprintf("%s-%d", topic, p)]
}

// produceN writes n records to partition 0 of topic, acks=all.
func produceN(t *testing.T, c *Cluster, topic string, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.Produce(context.Background(), topic, 0, -1, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// showsPositions reports whether the view lists exactly replicas, each with
// LEO and HW at offset, and the leader's view of each follower's LEO too.
func showsPositions(v *adminv1.PartitionView, replicas []int32, offset int64) bool {
	if v == nil || !slices.Equal(v.GetReplicas(), replicas) || !v.GetHighWatermarkKnown() || v.GetHighWatermark() != offset {
		return false
	}
	for _, rv := range v.GetReplicaViews() {
		if !rv.GetReported() || rv.GetLogEndOffset() != offset || rv.GetHighWatermark() != offset {
			return false
		}
		if !rv.GetLeader() && rv.GetLeaderKnownLogEndOffset() != offset {
			return false
		}
	}
	return len(v.GetReplicaViews()) == len(replicas)
}

// Brokers report only what changed (full reports only at a session's start
// and every 30 s); the console's views must still follow every replica:
// followers' positions after produces and after a controller failover, a
// replica moved, a topic deleted and created again, and a dead follower's
// caught-up age.
func TestConsoleViewsFollowDeltaReports(t *testing.T) {
	c := Start(t, Options{Brokers: 4, Controllers: 2})
	views := watchViews(t, c, "views")
	CreateAssigned(t, c, "views", [][]int32{{1, 2, 3}}, nil)
	produce := func(n int) { t.Helper(); produceN(t, c, "views", n) }
	produce(5)
	c.WaitFor(10*time.Second, "every replica of views-0 at 5 in the console", func() bool {
		return showsPositions(views.of("views", 0), []int32{1, 2, 3}, 5)
	})
	// Idle reports carry nothing; the next change must still arrive.
	time.Sleep(2 * time.Second)
	produce(3)
	c.WaitFor(10*time.Second, "every replica of views-0 at 8 in the console", func() bool {
		return showsPositions(views.of("views", 0), []int32{1, 2, 3}, 8)
	})

	// A new controller hears of every replica from each broker's new
	// session, the partition idle meanwhile.
	old, _ := c.ActiveController()
	c.StopController(old)
	c.WaitFor(15*time.Second, "another controller active", func() bool { id, _ := c.ActiveController(); return id > 0 && id != old })
	views = watchViews(t, c, "views")
	c.WaitFor(10*time.Second, "every replica of views-0 at 8 in the new controller's console", func() bool {
		return showsPositions(views.of("views", 0), []int32{1, 2, 3}, 8)
	})

	Reassign(t, c, "views", map[int32][]int32{0: {1, 2, 4}})
	c.WaitFor(20*time.Second, "views-0 moved to 1, 2, 4 in the console", func() bool {
		return SettledOn(c, "views", 0, []int32{1, 2, 4}) && showsPositions(views.of("views", 0), []int32{1, 2, 4}, 8)
	})
	produce(1)
	c.WaitFor(10*time.Second, "the moved-in replica at 9 in the console", func() bool {
		return showsPositions(views.of("views", 0), []int32{1, 2, 4}, 9)
	})

	resp, err := c.Admin().DeleteTopics(context.Background(), &adminv1.DeleteTopicsRequest{Topics: []string{"views"}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	for _, id := range []int32{1, 2, 4} {
		Gone(t, c, id, "views", 0)
	}
	CreateAssigned(t, c, "views", [][]int32{{1, 2, 4}}, nil)
	produce(2)
	c.WaitFor(10*time.Second, "the recreated topic's replicas at 2 in the console", func() bool {
		return showsPositions(views.of("views", 0), []int32{1, 2, 4}, 2)
	})

	// A dead follower's caught-up age keeps growing in the console.
	c.CrashBroker(4)
	lagOf4 := func() int64 {
		v := views.of("views", 0)
		for _, rv := range v.GetReplicaViews() {
			if rv.GetBrokerId() == 4 {
				return rv.GetLagMs()
			}
		}
		return -1
	}
	var first int64
	c.WaitFor(10*time.Second, "broker 4 shown lagging", func() bool { first = lagOf4(); return first >= 2000 })
	c.WaitFor(5*time.Second, "broker 4's lag moving on in the console", func() bool { return lagOf4() >= first+2000 })
}

// A frozen controller (as under SIGSTOP) leaves the brokers' session
// streams to it open: its connections stall, they do not close. The
// brokers must still move their sessions to the controller that takes
// office, or it never hears the positions of a replica that stays idle (its
// console showed every replica at 0/0 with HW 0 until the frozen one
// resumed) nor anything the brokers report. Its fast failover, which
// watches the sessions, was blind too; that is not timed here (under load
// a probe may time out and leave the broker to its lease, as designed),
// only that a crash is then handled and shown.
func TestSessionsLeaveAFrozenController(t *testing.T) {
	c := Start(t, Options{Brokers: 3, PausableControllers: true})
	CreateAssigned(t, c, "frozen", [][]int32{{1, 2, 3}}, nil)
	produce := func(n int) { t.Helper(); produceN(t, c, "frozen", n) }
	produce(5)
	views := watchViews(t, c, "frozen")
	c.WaitFor(10*time.Second, "every replica of frozen-0 at 5 in the console", func() bool {
		return showsPositions(views.of("frozen", 0), []int32{1, 2, 3}, 5)
	})
	old, epoch := c.ActiveController()
	c.PauseController(old)
	defer c.ResumeController(old)
	c.WaitFor(20*time.Second, "the standby in office", func() bool {
		id, e := c.ActiveController()
		return id >= 0 && id != old && e > epoch
	})
	// Nothing is written meanwhile: only the brokers' new sessions can
	// tell the new controller where the replicas are.
	views = watchViews(t, c, "frozen")
	c.WaitFor(10*time.Second, "every replica of frozen-0 at 5 in the new controller's console", func() bool {
		return showsPositions(views.of("frozen", 0), []int32{1, 2, 3}, 5)
	})
	produce(3)
	c.WaitFor(10*time.Second, "every replica of frozen-0 at 8 in the new controller's console", func() bool {
		return showsPositions(views.of("frozen", 0), []int32{1, 2, 3}, 8)
	})
	c.CrashBroker(3)
	c.WaitFor(15*time.Second, "broker 3 out of the ISR", func() bool {
		return slices.Equal(c.Partition("frozen", 0).GetIsr(), []int32{1, 2})
	})
	produce(2)
	// The crashed broker's replica is shown unknown, not at 0/0.
	c.WaitFor(10*time.Second, "brokers 1 and 2 at 10 and broker 3 unreported in the new controller's console", func() bool {
		v := views.of("frozen", 0)
		if v == nil || !v.GetHighWatermarkKnown() || v.GetHighWatermark() != 10 {
			return false
		}
		for _, rv := range v.GetReplicaViews() {
			if rv.GetReported() != (rv.GetBrokerId() != 3) {
				return false
			}
		}
		return true
	})
}

// viewsDisagree reads the active controller's console views once and
// names where they differ from the partitions as read from the brokers:
// every readable replica must be shown reported at its LEO and HW, and the
// partition's HW known and equal to the leader's. Empty when they agree.
func (c *Cluster) viewsDisagree(f history.Final) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var topics []string
	for _, ps := range f.Partitions {
		if !slices.Contains(topics, ps.TP.Topic) {
			topics = append(topics, ps.TP.Topic)
		}
	}
	stream, err := c.Admin().WatchCluster(ctx, &adminv1.WatchClusterRequest{Topics: topics, IntervalMs: 100})
	if err != nil {
		return fmt.Sprintf("WatchCluster: %v", err)
	}
	msg, err := stream.Recv()
	if err != nil {
		return fmt.Sprintf("WatchCluster: %v", err)
	}
	views := map[history.TP]*adminv1.PartitionView{}
	for _, v := range msg.GetPartitions() {
		views[history.TP{Topic: v.GetTopic(), Partition: v.GetPartition()}] = v
	}
	var wrong []string
	for _, ps := range f.Partitions {
		v := views[ps.TP]
		if v == nil {
			wrong = append(wrong, fmt.Sprintf("%s: no view", ps.TP))
			continue
		}
		for _, rs := range ps.Replicas {
			if !rs.Readable {
				continue
			}
			i := slices.IndexFunc(v.GetReplicaViews(), func(rv *adminv1.ReplicaView) bool { return rv.GetBrokerId() == rs.Broker })
			if i < 0 {
				wrong = append(wrong, fmt.Sprintf("%s: broker %d not shown", ps.TP, rs.Broker))
				continue
			}
			rv := v.GetReplicaViews()[i]
			if !rv.GetReported() || rv.GetLogEndOffset() != rs.LEO || rv.GetHighWatermark() != rs.HW {
				wrong = append(wrong, fmt.Sprintf("%s: broker %d shown at %d/%d (reported %t), has %d/%d",
					ps.TP, rs.Broker, rv.GetLogEndOffset(), rv.GetHighWatermark(), rv.GetReported(), rs.LEO, rs.HW))
			}
			if rs.Broker == ps.Leader && (!v.GetHighWatermarkKnown() || v.GetHighWatermark() != rs.HW) {
				wrong = append(wrong, fmt.Sprintf("%s: HW shown %d (known %t), leader %d has %d",
					ps.TP, v.GetHighWatermark(), v.GetHighWatermarkKnown(), rs.Broker, rs.HW))
			}
		}
	}
	return strings.Join(wrong, "; ")
}

// awaitViewsAgree waits up to bound for the console views to agree with
// the quiet cluster (see viewsDisagree) and returns the last disagreement,
// empty when they came to agree.
func (c *Cluster) awaitViewsAgree(f history.Final, bound time.Duration) string {
	deadline := time.Now().Add(bound)
	for {
		wrong := c.viewsDisagree(f)
		if wrong == "" || time.Now().After(deadline) {
			return wrong
		}
		time.Sleep(100 * time.Millisecond)
	}
}

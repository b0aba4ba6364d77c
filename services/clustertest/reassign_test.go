package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// moveWriter runs one idempotent acks=all producer over every partition of
// a topic, with a bounded window per partition, and keeps what was
// acknowledged at which offset.
type moveWriter struct {
	p      *client.Producer
	mu     sync.Mutex
	acked  map[int32]map[int64]string
	failed []error
	stop   chan struct{}
	done   sync.WaitGroup
}

func startMoveWriter(t *testing.T, c *Cluster, topic string, partitions int32) *moveWriter {
	p, err := client.NewProducer(c.Client(), client.ProducerOptions{Acks: client.AcksAll, DeliveryTimeout: 45 * time.Second, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Idempotent() {
		t.Fatal("the producer is not idempotent")
	}
	w := &moveWriter{p: p, acked: map[int32]map[int64]string{}, stop: make(chan struct{})}
	for part := int32(0); part < partitions; part++ {
		w.acked[part] = map[int64]string{}
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			window := make(chan struct{}, 32)
			for seq := 0; ; seq++ {
				select {
				case <-w.stop:
					return
				case window <- struct{}{}:
				}
				v := fmt.Sprintf("p%d-%d", part, seq)
				p.ProduceAsync(client.Record{Topic: topic, Partition: part, ManualPartition: true, Value: []byte(v)},
					func(res client.Result, err error) {
						<-window
						w.mu.Lock()
						defer w.mu.Unlock()
						if err != nil {
							w.failed = append(w.failed, fmt.Errorf("%s: %w", v, err))
							return
						}
						w.acked[part][res.Offset] = v
					})
			}
		}()
	}
	return w
}

func (w *moveWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.acked {
		n += len(m)
	}
	return n
}

// finish stops writing, waits for every answer and fails the test on any
// write that failed for good.
func (w *moveWriter) finish(t *testing.T) map[int32]map[int64]string {
	close(w.stop)
	w.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.p.Close(ctx); err != nil {
		t.Errorf("close producer: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failed) > 0 {
		t.Errorf("%d writes failed, first: %v", len(w.failed), w.failed[0])
	}
	return w.acked
}

// A 3-partition RF 3 topic moves from brokers 1,2,3 to 2,3,4 under an
// idempotent acks=all producer: nothing fails or is lost, replicas and ISR
// end as the target (partition 0's leader, broker 1, has to move), broker
// 1's logs are deleted, HW = LEO everywhere, and after a quiet gap longer
// than replica.lag.time.max.ms each partition keeps its leader and full ISR.
func TestReassignWhileProducing(t *testing.T) {
	c := Start(t, Options{Brokers: 4, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	from := [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}
	to := map[int32][]int32{0: {2, 3, 4}, 1: {3, 4, 2}, 2: {4, 2, 3}}
	CreateAssigned(t, c, "move", from, map[string]string{"min.insync.replicas": "2"})

	w := startMoveWriter(t, c, "move", 3)
	c.WaitFor(20*time.Second, "writes before the move", func() bool { return w.count() >= 300 })
	Reassign(t, c, "move", to)
	for p, want := range to {
		c.WaitFor(30*time.Second, fmt.Sprintf("move-%d on %v", p, want), func() bool { return SettledOn(c, "move", p, want) })
	}
	before := w.count()
	c.WaitFor(20*time.Second, "writes after the move", func() bool { return w.count() >= before+300 })
	acked := w.finish(t)

	if l := c.Partition("move", 0).GetLeader(); l == 1 {
		t.Errorf("move-0 is still led by broker 1")
	}
	for p, want := range to {
		CheckWholeAndLive(t, c, "move", p, want, acked[p])
		Gone(t, c, 1, "move", p)
	}
	list, err := c.Admin().ListPartitionReassignments(context.Background(), &adminv1.ListPartitionReassignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetReassignments()); n != 0 {
		t.Errorf("%d reassignments still listed: %v", n, list.GetReassignments())
	}

	// A quiet gap: nothing written for longer than the lag time.
	leaders := map[int32]int32{}
	for p := range to {
		leaders[p] = c.Partition("move", p).GetLeader()
	}
	time.Sleep(2500 * time.Millisecond)
	for p, want := range to {
		if !SettledOn(c, "move", p, want) || c.Partition("move", p).GetLeader() != leaders[p] {
			t.Errorf("move-%d after a quiet gap: %v", p, c.Partition("move", p))
		}
		CheckWholeAndLive(t, c, "move", p, want, acked[p])
	}
}

// The active controller stops while the new replica cannot catch up (its
// links to the other brokers are cut); the next controller finds the move
// in etcd and finishes it once the links heal.
func TestReassignmentFinishesAfterControllerFailover(t *testing.T) {
	c := Start(t, Options{Brokers: 4, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	CreateAssigned(t, c, "fo", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	for i := range 50 {
		if _, err := c.Produce(context.Background(), "fo", 0, -1, fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int32{1, 2, 3} {
		c.Net.Partition(BrokerName(4), BrokerName(id))
	}
	Reassign(t, c, "fo", map[int32][]int32{0: {2, 3, 4}})
	c.WaitFor(10*time.Second, "broker 4 to host fo-0", func() bool {
		_, _, ok := c.Broker(4).ReplicaOffsets("fo", 0)
		return ok
	})
	pd := c.Partition("fo", 0)
	if !slices.Equal(pd.GetAddingReplicas(), []int32{4}) || !slices.Equal(pd.GetRemovingReplicas(), []int32{1}) {
		t.Fatalf("during the move: %v", pd)
	}
	active, epoch := c.ActiveController()
	c.StopController(active)
	c.WaitFor(15*time.Second, "a new active controller", func() bool {
		id, e := c.ActiveController()
		return id >= 0 && id != active && e > epoch
	})
	if pd := c.Partition("fo", 0); len(pd.GetAddingReplicas()) == 0 {
		t.Fatalf("the new controller lost the move: %v", pd)
	}
	c.Net.HealAll()
	c.WaitFor(30*time.Second, "fo-0 on 2,3,4", func() bool { return SettledOn(c, "fo", 0, []int32{2, 3, 4}) })
	acked := map[int64]string{}
	for i := range 50 {
		acked[int64(i)] = fmt.Sprintf("v%d", i)
	}
	CheckWholeAndLive(t, c, "fo", 0, []int32{2, 3, 4}, acked)
	Gone(t, c, 1, "fo", 0)
}

// A cancel while the new replica is catching up (held back by the
// follower throttle) restores the original replicas and deletes the new
// replica's partial log; a second cancel is NO_REASSIGNMENT_IN_PROGRESS, and
// bad targets are refused.
func TestCancelReassignmentDuringCatchUp(t *testing.T) {
	c := Start(t, Options{Brokers: 4, BrokerSettings: map[string]string{"replica.fetch.max.bytes": "1024"}})
	CreateAssigned(t, c, "cx", [][]int32{{1, 2, 3}}, nil)
	for i := range 400 {
		if _, err := c.Produce(context.Background(), "cx", 0, -1, fmt.Sprintf("value-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// 200 bytes/s into broker 4 for cx-0: the copy takes minutes.
	Throttle(t, c, "cx", "4", "follower.replication.throttled.rate", "200", "follower.replication.throttled.replicas", "0:4")
	Reassign(t, c, "cx", map[int32][]int32{0: {2, 3, 4}})
	c.WaitFor(20*time.Second, "broker 4 part way through its copy", func() bool {
		_, leo, ok := c.Broker(4).ReplicaOffsets("cx", 0)
		return ok && leo > 0
	})
	// The progress view: broker 4's bytes left, from the brokers' reports.
	c.WaitFor(10*time.Second, "progress of the copy reported", func() bool {
		list, err := c.Admin().ListPartitionReassignments(context.Background(), &adminv1.ListPartitionReassignmentsRequest{})
		if err != nil || len(list.GetReassignments()) != 1 {
			return false
		}
		m := list.GetReassignments()[0].GetProgress()
		return len(m) == 1 && m[0].GetBrokerId() == 4 && m[0].GetBytesLeft() > 0 && m[0].GetLeaderSizeBytes() > m[0].GetSizeBytes() &&
			m[0].GetLeaderLogEndOffset() == 400 && !m[0].GetInIsr()
	})
	if _, leo, _ := c.Broker(4).ReplicaOffsets("cx", 0); leo >= 400 {
		t.Fatalf("broker 4 caught up before the cancel (LEO %d)", leo)
	}
	Reassign(t, c, "cx", map[int32][]int32{0: nil})
	// As in Kafka, the original replicas come back in the order they had
	// in the moving replica set (target first): RS 2,3,4,1 less 4.
	c.WaitFor(10*time.Second, "cx-0 back on 2,3,1", func() bool { return SettledOn(c, "cx", 0, []int32{2, 3, 1}) })
	Gone(t, c, 4, "cx", 0)
	c.Net.HealAll()

	resp, err := c.Admin().AlterPartitionReassignments(context.Background(), &adminv1.AlterPartitionReassignmentsRequest{
		Partitions: []*adminv1.ReassignablePartition{
			{Topic: "cx", Partition: 0},
			{Topic: "cx", Partition: 7},
			{Topic: "cx", Partition: 0}, // twice in one request
		}})
	if err != nil {
		t.Fatal(err)
	}
	want := []commonv1.ErrorCode{commonv1.ErrorCode(kerr.NoReassignmentInProgress), commonv1.ErrorCode(kerr.UnknownTopicOrPartition),
		commonv1.ErrorCode(kerr.InvalidRequest)}
	for i, r := range resp.GetResults() {
		if r.GetErrorCode() != want[i] {
			t.Errorf("item %d: %s (%s), want %s", i, r.GetErrorCode(), r.GetErrorMessage(), want[i])
		}
	}
	for _, bad := range [][]int32{{2, 2, 3}, {2, 3, 9}} {
		resp, err := c.Admin().AlterPartitionReassignments(context.Background(), &adminv1.AlterPartitionReassignmentsRequest{
			Partitions: []*adminv1.ReassignablePartition{{Topic: "cx", Partition: 0, Replicas: bad}}})
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.GetResults()[0]; r.GetErrorCode() != commonv1.ErrorCode(kerr.InvalidReplicaAssignment) {
			t.Errorf("target %v: %s (%s), want INVALID_REPLICA_ASSIGNMENT", bad, r.GetErrorCode(), r.GetErrorMessage())
		}
	}
	if _, err := c.Admin().ListPartitionReassignments(context.Background(), &adminv1.ListPartitionReassignmentsRequest{
		Partitions: []*commonv1.TopicPartition{{Topic: "ghost", Partition: 0}}}); kerr.CodeOf(kerr.FromStatus(err)) != kerr.UnknownTopicOrPartition {
		t.Errorf("listing an unknown topic: %v", err)
	}
	if !SettledOn(c, "cx", 0, []int32{2, 3, 1}) {
		t.Errorf("refused requests changed cx-0: %v", c.Partition("cx", 0))
	}
}

// CreatePartitions grows a topic, placing the new partitions as creation
// does; the new partitions take writes; shrinking is INVALID_PARTITIONS.
func TestCreatePartitionsThenProduce(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	c.CreateTopic("grow", 2, 3, nil)
	resp, err := c.Admin().CreatePartitions(context.Background(), &adminv1.CreatePartitionsRequest{
		Topics: []*adminv1.CreatePartitionsTopic{{Name: "grow", Count: 5}}, TimeoutMs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResults()[0]; r.GetErrorCode() != 0 || len(r.GetAssignments()) != 3 {
		t.Fatalf("create partitions: %v", r)
	}
	for p := int32(0); p < 5; p++ {
		c.WaitFor(10*time.Second, fmt.Sprintf("grow-%d led with a full ISR", p), func() bool {
			pd := c.Partition("grow", p)
			return len(pd.GetReplicas()) == 3 && len(pd.GetIsr()) == 3 && c.Leads(pd.GetLeader(), "grow", p)
		})
	}
	for p := int32(2); p < 5; p++ {
		var off int64
		c.WaitFor(10*time.Second, fmt.Sprintf("a write to grow-%d", p), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			off, err = c.Produce(ctx, "grow", p, -1, "new")
			return err == nil
		})
		if off != 0 {
			t.Errorf("grow-%d: first write at offset %d", p, off)
		}
	}
	for _, n := range []int32{5, 3} {
		resp, err := c.Admin().CreatePartitions(context.Background(), &adminv1.CreatePartitionsRequest{
			Topics: []*adminv1.CreatePartitionsTopic{{Name: "grow", Count: n}}})
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.GetResults()[0]; r.GetErrorCode() != commonv1.ErrorCode(kerr.InvalidPartitions) {
			t.Errorf("count %d: %s (%s), want INVALID_PARTITIONS", n, r.GetErrorCode(), r.GetErrorMessage())
		}
	}
}

// The active controller freezes (as under SIGSTOP) while the new replica's
// copy is held back by a throttle; the standby takes office, the throttle
// is lifted through it and the move finishes; the old controller, resumed,
// is fenced and changes nothing.
func TestReassignmentFinishesAfterControllerPause(t *testing.T) {
	c := Start(t, Options{Brokers: 4, PausableControllers: true, BrokerSettings: map[string]string{"replica.fetch.max.bytes": "1024"}})
	CreateAssigned(t, c, "pz", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	acked := map[int64]string{}
	for i := range 300 {
		v := fmt.Sprintf("value-%04d", i)
		off, err := c.Produce(context.Background(), "pz", 0, -1, v)
		if err != nil {
			t.Fatal(err)
		}
		acked[off] = v
	}
	Throttle(t, c, "pz", "4", "follower.replication.throttled.rate", "200", "follower.replication.throttled.replicas", "0:4")
	Reassign(t, c, "pz", map[int32][]int32{0: {2, 3, 4}})
	c.WaitFor(20*time.Second, "broker 4 part way through its copy", func() bool {
		_, leo, ok := c.Broker(4).ReplicaOffsets("pz", 0)
		return ok && leo > 0
	})
	old, epoch := c.ActiveController()
	c.PauseController(old)
	c.WaitFor(20*time.Second, "the standby in office", func() bool {
		id, e := c.ActiveController()
		return id >= 0 && id != old && e > epoch
	})
	if _, leo, _ := c.Broker(4).ReplicaOffsets("pz", 0); leo >= 300 {
		t.Fatalf("the copy finished before the failover (LEO %d)", leo)
	}
	if pd := c.Partition("pz", 0); !slices.Equal(pd.GetAddingReplicas(), []int32{4}) {
		t.Fatalf("the new controller lost the move: %v", pd)
	}
	// The frozen controller may still believe it is active for a moment:
	// NOT_CONTROLLER from it is retried, as a client would.
	c.WaitFor(10*time.Second, "the throttle lifted", func() bool {
		resp, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{
			{Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: "4"},
				Ops: []*adminv1.ConfigOp{{Name: "follower.replication.throttled.rate", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE}}}}})
		return err == nil && resp.GetResults()[0].GetErrorCode() == 0
	})
	c.WaitFor(30*time.Second, "pz-0 on 2,3,4", func() bool { return SettledOn(c, "pz", 0, []int32{2, 3, 4}) })
	c.ResumeController(old)
	CheckWholeAndLive(t, c, "pz", 0, []int32{2, 3, 4}, acked)
	Gone(t, c, 1, "pz", 0)
	if ok, why := settledWhy(c, "pz", 0, []int32{2, 3, 4}); !ok {
		t.Errorf("after the old controller resumed: %s", why)
	}
}

// A move off a leader that cannot yield (every link of it stalls, etcd's
// too, as the yield is sent: its lease runs out and the partition fails
// over into the target) completes though nothing is produced and the old
// leader stays away: the idle partition's replicas are all in the ISR and
// change its state no more, so the controller itself must look at the move
// again.
func TestReassignmentOffALeaderThatCouldNotYieldCompletesWhileIdle(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	CreateAssigned(t, c, "still", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	acked := ProduceAcked(t, c, "still", 20)
	c.SameLogs("still", 0, 1, 2, 3)
	c.Net.Pause(BrokerName(1))
	c.EtcdLink(1).Pause()
	Reassign(t, c, "still", map[int32][]int32{0: {3, 2}})
	// Nothing is produced from here on, and broker 1 stays away.
	c.WaitFor(20*time.Second, "still-0 on 3,2 with broker 1 still away", func() bool { return SettledOn(c, "still", 0, []int32{3, 2}) })
	CheckWholeAndLive(t, c, "still", 0, []int32{3, 2}, acked)
	c.EtcdLink(1).Resume()
	c.Net.Resume(BrokerName(1))
	Gone(t, c, 1, "still", 0)
	if ok, why := settledWhy(c, "still", 0, []int32{3, 2}); !ok {
		t.Errorf("after broker 1 came back: %s", why)
	}
}

// A broker gone for good is reassigned away while it is down: the move
// completes without it, the cluster stops listing it, and when it comes
// back anyway its leftover replica is deleted as a stray (its StopReplica
// could never be delivered).
func TestReassignAwayFromADeadBroker(t *testing.T) {
	c := Start(t, Options{Brokers: 4, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	CreateAssigned(t, c, "dead", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	acked := ProduceAcked(t, c, "dead", 50)
	c.SameLogs("dead", 0, 1, 2, 3)
	c.CrashBroker(3)
	c.WaitFor(15*time.Second, "broker 3 out of the ISR", func() bool {
		return !slices.Contains(c.Partition("dead", 0).GetIsr(), 3)
	})
	Reassign(t, c, "dead", map[int32][]int32{0: {1, 2, 4}})
	c.WaitFor(20*time.Second, "dead-0 on 1,2,4", func() bool { return SettledOn(c, "dead", 0, []int32{1, 2, 4}) })
	CheckWholeAndLive(t, c, "dead", 0, []int32{1, 2, 4}, acked)
	c.WaitFor(10*time.Second, "broker 3 no longer listed", func() bool {
		cl, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, b := range cl.GetBrokers() {
			if b.GetNode().GetId() == 3 {
				return false
			}
		}
		return true
	})
	dir := filepath.Join(c.BrokerConfig(3).DataDir, "dead-0")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the dead broker's log should still be on its disk: %v", err)
	}
	c.StartBroker(3)
	Gone(t, c, 3, "dead", 0)
	if !SettledOn(c, "dead", 0, []int32{1, 2, 4}) {
		t.Errorf("after broker 3 returned: %v", c.Partition("dead", 0))
	}
}

// A topic deleted while one of its partitions is being moved goes away
// whole: the adding replica's partial log too, and no move is left listed.
func TestDeleteTopicDuringReassignment(t *testing.T) {
	c := Start(t, Options{Brokers: 4, BrokerSettings: map[string]string{"replica.fetch.max.bytes": "1024"}})
	CreateAssigned(t, c, "del", [][]int32{{1, 2, 3}}, nil)
	for i := range 200 {
		if _, err := c.Produce(context.Background(), "del", 0, -1, fmt.Sprintf("value-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	Throttle(t, c, "del", "4", "follower.replication.throttled.rate", "200", "follower.replication.throttled.replicas", "0:4")
	Reassign(t, c, "del", map[int32][]int32{0: {2, 3, 4}})
	c.WaitFor(20*time.Second, "broker 4 part way through its copy", func() bool {
		_, leo, ok := c.Broker(4).ReplicaOffsets("del", 0)
		return ok && leo > 0
	})
	resp, err := c.Admin().DeleteTopics(context.Background(), &adminv1.DeleteTopicsRequest{Topics: []string{"del"}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	for _, id := range []int32{1, 2, 3, 4} {
		Gone(t, c, id, "del", 0)
	}
	list, err := c.Admin().ListPartitionReassignments(context.Background(), &adminv1.ListPartitionReassignmentsRequest{})
	if err != nil || len(list.GetReassignments()) != 0 {
		t.Errorf("moves left after the deletion: %v %v", list, err)
	}
}

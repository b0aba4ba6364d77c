package ctrl

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// reportingCore is a core with topic t of 3 partitions and an open
// session of broker 1 epoch 5.
func reportingCore() (*core, *session) {
	c := newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.DiscardHandler), policy{}, nil)
	t := &topic{name: "t"}
	for i := range int32(3) {
		t.parts = append(t.parts, &partition{t: t, id: i, replicas: election.Assignment{1, 2}})
	}
	c.topics["t"] = t
	s := &session{brokerID: 1, epoch: 5, kick: make(chan struct{})}
	c.sessions[1] = s
	return c, s
}

func rp(broker, part int32, leo int64) *controlv1.ReplicaProgress {
	return &controlv1.ReplicaProgress{Topic: "t", Partition: part, BrokerId: broker, LogEndOffset: leo}
}

// held lists the progress entries as "broker/partition@leo", sorted.
func held(c *core) []string {
	var out []string
	for k, p := range c.progress {
		out = append(out, fmt.Sprintf("%d/%d@%d", k.broker, k.tp.Partition, p.GetLogEndOffset()))
	}
	slices.Sort(out)
	return out
}

func TestSessionReportsApplyFullDeltaAndRemoved(t *testing.T) {
	a, s := reportingCore()
	a.progress[progressKey{tp: election.TopicPartition{Topic: "t", Partition: 2}, broker: 1}] = rp(1, 2, 5)
	a.progress[progressKey{tp: election.TopicPartition{Topic: "t", Partition: 0}, broker: 2}] = rp(2, 0, 7)
	want := func(step string, w ...string) {
		t.Helper()
		if got := held(a); !slices.Equal(got, w) {
			t.Fatalf("%s: progress %v, want %v", step, got, w)
		}
	}
	full := &controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 5, FullReport: true,
		Replicas: []*controlv1.ReplicaProgress{rp(1, 0, 10), rp(1, 1, 10)}}
	a.report(s, full, 1)
	want("a full report drops the broker's unlisted replicas, not other brokers'", "1/0@10", "1/1@10", "2/0@7")

	a.report(s, &controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 5, Replicas: []*controlv1.ReplicaProgress{rp(1, 1, 11)}}, 1)
	want("a delta updates what it lists and keeps the rest", "1/0@10", "1/1@11", "2/0@7")

	a.report(s, &controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 5,
		Removed: []*commonv1.TopicPartition{{Topic: "t", Partition: 0}}}, 1)
	want("removed replicas are dropped", "1/1@11", "2/0@7")

	a.viewDirty = false
	a.report(s, &controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 5}, 1)
	if a.viewDirty {
		t.Fatal("an empty delta woke the watchers")
	}
	want("an empty delta changes nothing", "1/1@11", "2/0@7")

	a.report(s, &controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 5, FullReport: true}, 1)
	want("an empty full report: the broker hosts nothing", "2/0@7")
}

// A restarted broker's new session may report before the controller sees
// the old incarnation depart: its one full report must survive that.
func TestOldIncarnationDepartingKeepsTheNewSessionsProgress(t *testing.T) {
	a, s := reportingCore()
	old := &broker{info: metastore.Broker{BrokerInfo: metastore.BrokerInfo{ID: 1}, Epoch: 4}}
	a.brokers[1] = old
	a.report(s, &controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 5, FullReport: true,
		Replicas: []*controlv1.ReplicaProgress{rp(1, 0, 10)}}, 1)
	a.removeBroker(old)
	if got := held(a); !slices.Equal(got, []string{"1/0@10"}) {
		t.Fatalf("after the old incarnation departed: %v", got)
	}

	// Without a newer session the departed incarnation's progress goes.
	s.epoch = 4
	a.brokers[1] = old
	a.removeBroker(old)
	if got := held(a); len(got) != 0 {
		t.Fatalf("after the reporting incarnation departed: %v", got)
	}
}

// A partition an unclean election gave to a broker whose log was lost is
// pushed with EmptyLogLeader until that broker reports leading it in the
// new epoch: then it has its log, and a later push (its registration after
// losing the disk a second time) must not make it start empty again. The
// stored flag stays until the state's next write.
func TestEmptyLogLeaderIsPushedOnlyUntilTheLeaderReportsItsLog(t *testing.T) {
	c, s := reportingCore()
	p := c.topics["t"].parts[0]
	p.rec = metastore.PartitionRecord{Topic: "t", State: metastore.PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1}, EmptyLogLeader: true}}
	leading := func(epoch int32) *controlv1.BrokerSessionRequest {
		r := rp(1, 0, 1)
		r.Leader, r.LeaderEpoch = true, epoch
		return &controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 5, Replicas: []*controlv1.ReplicaProgress{r}}
	}
	if !c.protoState(p).GetEmptyLogLeader() {
		t.Fatal("the push after the election does not say to lead from an empty log")
	}
	c.report(s, leading(3), 1) // its lost log's epoch, before the disk went
	if !c.protoState(p).GetEmptyLogLeader() {
		t.Fatal("a report of leading an earlier epoch dropped EmptyLogLeader")
	}
	c.report(s, leading(4), 2)
	if c.protoState(p).GetEmptyLogLeader() {
		t.Fatal("pushed EmptyLogLeader after the leader reported leading in the new epoch")
	}
}

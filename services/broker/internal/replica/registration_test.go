package replica

import (
	"sync/atomic"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/platform/kerr"
)

// A restarted broker waiting out its previous incarnation's lease is
// reachable at that incarnation's address, and the controller keeps
// pushing to it there. It refuses every push until it is registered (so
// the controller retries), then refuses the old incarnation's as stale and
// takes those for its own registration.
func TestControlRequestsWaitForTheRegistration(t *testing.T) {
	e := &env{t: t, clock: newManualClock(), ctrl: newFakeController(), ctrlEpoch: 1}
	e.net = &memNet{ctrl: e.ctrl, managers: map[string]*Manager{}}
	logs, err := logstore.OpenManager(logstore.ManagerOptions{FS: vfs.NewMem(), Dir: "/data", Now: e.clock.Now, NoBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	var epoch atomic.Int64
	m, err := New(Options{BrokerID: 1, Store: logManager{logs}, Meta: metadata.New(), Transport: e.net, Clock: e.clock,
		BrokerEpoch: epoch.Load, AwaitRegistration: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		_ = logs.Close()
	})
	const previous, current = 8, 19
	push := func(target int64) error {
		_, err := m.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1, BrokerEpoch: target,
			Partitions: []*commonv1.PartitionState{partitionState(tp0, 1, 2, 2, []int32{1})}})
		return err
	}
	for _, target := range []int64{previous, current} {
		if err := push(target); kerr.CodeOf(err) != kerr.BrokerNotAvailable {
			t.Fatalf("push for broker epoch %d before registering: %v, want BROKER_NOT_AVAILABLE", target, err)
		}
	}
	if _, ok := m.Replica(tp0); ok {
		t.Fatal("an unregistered broker created a replica on a controller's push")
	}
	epoch.Store(current)
	if err := push(previous); kerr.CodeOf(err) != kerr.StaleBrokerEpoch {
		t.Fatalf("push for the previous incarnation: %v, want STALE_BROKER_EPOCH", err)
	}
	if err := push(current); err != nil {
		t.Fatalf("push for this registration: %v", err)
	}
	r, ok := m.Replica(tp0)
	if !ok || !r.IsLeader() {
		t.Fatal("the push for this registration did not make the broker leader")
	}
}

// leaderAndIsrWithID sends tp's state with the topic's id, as the
// controller does.
func (e *env) leaderAndIsrWithID(id string, leader, leaderEpoch int32) {
	e.t.Helper()
	resp, err := e.m.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1],
		TopicConfigs: []*controlv1.TopicConfig{{Topic: tp0.Topic, TopicId: id, Configs: map[string]string{}}},
		Partitions:   []*commonv1.PartitionState{partitionState(tp0, leader, leaderEpoch, leaderEpoch, []int32{1, 2, 3})}})
	if err != nil || kerr.Code(resp.GetPartitions()[0].GetErrorCode()) != kerr.None {
		e.t.Fatalf("LeaderAndIsr: %v %v", resp, err)
	}
}

// A log records its topic's id the first time the controller names it; a
// LeaderAndIsr for a topic of the same name with another id finds a stray
// of a deleted topic: it is deleted and the replica starts empty, instead
// of serving (or following from) the old topic's records (KIP-516).
func TestStrayLogOfADeletedTopicIsReplaced(t *testing.T) {
	e := newEnv(t)
	e.leaderAndIsrWithID("old-id", 1, 0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a", "b", "c"), 0); err != nil {
		t.Fatal(err)
	}
	if got := e.replica().Log().TopicID(); got != "old-id" {
		t.Fatalf("the log records topic id %q, want old-id", got)
	}
	before := e.replica()

	// Same name, new topic (its leader epochs start again at 0).
	e.leaderAndIsrWithID("new-id", 1, 0)
	r := e.replica()
	if r == before || r.Log().LogEndOffset() != 0 || r.Log().TopicID() != "new-id" {
		t.Fatalf("after the new topic's LeaderAndIsr: same replica %v, LEO %d, topic id %q; want a new, empty log of new-id",
			r == before, r.Log().LogEndOffset(), r.Log().TopicID())
	}
	if !r.IsLeader() {
		t.Fatal("the new replica does not lead")
	}
	// The same id again is the same log.
	e.leaderAndIsrWithID("new-id", 1, 1)
	if e.replica() != r {
		t.Fatal("a LeaderAndIsr with the log's own topic id replaced the replica")
	}
}

// The full metadata a broker gets when it registers catches the same
// stray: the topic exists, this broker is assigned, but the id differs.
func TestFullMetadataDeletesAStrayOfAReusedTopicName(t *testing.T) {
	e := newEnv(t)
	e.leaderAndIsrWithID("old-id", 2, 0)
	full := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, Full: true,
		Controller:   &commonv1.Node{Id: 100, Address: ctrlAddr},
		TopicConfigs: []*controlv1.TopicConfig{{Topic: tp0.Topic, TopicId: "new-id"}},
		Partitions:   []*commonv1.PartitionState{partitionState(tp0, 2, 0, 0, []int32{1, 2, 3})}}
	for _, id := range []int32{1, 2, 3} {
		full.Brokers = append(full.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: id, Address: brokerAddr(id)}, BrokerEpoch: brokerEpochs[id]})
	}
	if err := e.m.UpdateMetadata(full); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.m.Replica(tp0); ok {
		t.Fatal("the stray replica of old-id is still hosted")
	}
	// The new topic's LeaderAndIsr then starts it afresh.
	e.leaderAndIsrWithID("new-id", 2, 0)
	if got := e.replica().Log().TopicID(); got != "new-id" {
		t.Fatalf("topic id %q, want new-id", got)
	}
}

// A consumer fetch naming the topic id its offset is in is refused
// UNKNOWN_TOPIC_ID by a log of the topic created again under the same
// name: at the same leader epoch and with the offset inside the new log,
// nothing else tells the two apart, and the new topic's records were
// served as if they followed the old ones (KIP-516).
func TestConsumerFetchOfADeletedTopicIDIsRefused(t *testing.T) {
	e := newEnv(t)
	e.leaderAndIsrWithID("old-id", 1, 0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a", "b"), 0); err != nil {
		t.Fatal(err)
	}
	fetch := func(id string) (ConsumerFetchResult, error) {
		return e.m.Fetch(t.Context(), ConsumerFetch{TP: tp0, Offset: 2, CurrentLeaderEpoch: 0, TopicID: id})
	}
	if res, err := fetch("old-id"); err != nil || res.TopicID != "old-id" {
		t.Fatalf("fetch of old-id from its own log: %+v %v", res, err)
	}
	e.leaderAndIsrWithID("new-id", 1, 0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a", "b", "c", "d"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch("old-id"); kerr.CodeOf(err) != kerr.UnknownTopicID {
		t.Fatalf("fetch of old-id from new-id's log: %v, want UNKNOWN_TOPIC_ID", err)
	}
	for _, id := range []string{"new-id", ""} {
		if res, err := fetch(id); err != nil || res.TopicID != "new-id" {
			t.Fatalf("fetch naming topic id %q: %+v %v", id, res, err)
		}
	}
}

// A read naming the topic id the metadata has, of a log that still holds
// another (a stray of the deleted topic, between the new id's arrival and
// the LeaderAndIsr that replaces it), is INCONSISTENT_TOPIC_ID, which a
// reader retries, as Kafka answers, not UNKNOWN_TOPIC_ID, which tells it
// its topic is gone. A broker that does not serve the partition says so
// first, whatever log it holds.
func TestReadOfAStrayLogByTheNewIDIsInconsistent(t *testing.T) {
	e := newEnv(t)
	e.leaderAndIsrWithID("old-id", 1, 0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a", "b"), 0); err != nil {
		t.Fatal(err)
	}
	e.m.opts.Meta.PutTopicConfig(tp0.Topic, map[string]string{}, "new-id")
	fetch := func(id string) error {
		_, err := e.m.Fetch(t.Context(), ConsumerFetch{TP: tp0, Offset: 0, CurrentLeaderEpoch: -1, TopicID: id})
		return err
	}
	if err := fetch("new-id"); kerr.CodeOf(err) != kerr.InconsistentTopicID {
		t.Fatalf("fetch of new-id from the stray old-id log: %v, want INCONSISTENT_TOPIC_ID", err)
	}
	// Moved to broker 2 (the controller would stop this replica).
	e.leaderAndIsrWithID("old-id", 2, 1)
	if err := fetch("new-id"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("fetch from a broker that no longer leads: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}

// logOnDisk leaves broker 1 a log of tp recording topic id id (none for
// ""), with a record in it, that it no longer serves: what a broker finds
// on disk when it starts again.
func (e *env) logOnDisk(tp TP, id string) {
	e.t.Helper()
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1],
		Partitions: []*commonv1.PartitionState{partitionState(tp, 1, 0, 0, []int32{1})}}
	if id != "" {
		req.TopicConfigs = []*controlv1.TopicConfig{{Topic: tp.Topic, TopicId: id, Configs: map[string]string{}}}
	}
	if resp, err := e.m.LeaderAndIsr(req); err != nil || kerr.Code(resp.GetPartitions()[0].GetErrorCode()) != kerr.None {
		e.t.Fatalf("LeaderAndIsr for %v: %v %v", tp, resp, err)
	}
	if _, err := e.m.Produce(e.t.Context(), tp, 1, batch("old"), 0); err != nil {
		e.t.Fatal(err)
	}
	stop := &controlv1.StopReplicaRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1],
		Partitions: []*controlv1.StopReplicaPartition{{Topic: tp.Topic, Partition: tp.Partition, LeaderEpoch: -1}}}
	if _, err := e.m.StopReplica(stop); err != nil {
		e.t.Fatal(err)
	}
	if _, served := e.m.Replica(tp); served || !e.m.logs.Has(tp) {
		e.t.Fatalf("%v: served %v, log on disk %v; want a log on disk only", tp, served, e.m.logs.Has(tp))
	}
}

// fullMetadataOf sends broker 1 a full UpdateMetadata listing topic
// "t" under id with the partitions given, each on brokers 1-3.
func (e *env) fullMetadataOf(id string, partitions ...int32) {
	e.t.Helper()
	full := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, Full: true,
		Controller:   &commonv1.Node{Id: 100, Address: ctrlAddr},
		TopicConfigs: []*controlv1.TopicConfig{{Topic: "t", TopicId: id}}}
	for _, p := range partitions {
		full.Partitions = append(full.Partitions, partitionState(TP{Topic: "t", Partition: p}, 2, 0, 0, []int32{1, 2, 3}))
	}
	for _, b := range []int32{1, 2, 3} {
		full.Brokers = append(full.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: b, Address: brokerAddr(b)}, BrokerEpoch: brokerEpochs[b]})
	}
	if err := e.m.UpdateMetadata(full); err != nil {
		e.t.Fatal(err)
	}
}

// A topic deleted and created again with fewer partitions while this
// broker was gone leaves it logs of the old topic: the full metadata it
// gets when it registers finds them on disk, before any LeaderAndIsr
// serves them. A log of a partition number the topic has again but under
// another id, and one of a partition number it no longer has (with the old
// id, or none recorded), are strays, and deleted. Before, only served
// replicas had their id compared, and a partition missing from the view
// passed every check: the old segments stayed for good.
func TestFullMetadataDeletesLogsOnDiskOfATopicCreatedAgainSmaller(t *testing.T) {
	e := newEnv(t)
	tp1, tp2 := TP{Topic: "t", Partition: 1}, TP{Topic: "t", Partition: 2}
	e.logOnDisk(tp0, "old-id")
	e.logOnDisk(tp1, "old-id")
	e.logOnDisk(tp2, "")

	e.fullMetadataOf("new-id", 0)
	for _, tp := range []TP{tp0, tp1, tp2} {
		if e.m.logs.Has(tp) {
			t.Errorf("the stray log of %v is still on disk", tp)
		}
	}
	// The new topic's LeaderAndIsr then starts its partition afresh.
	e.leaderAndIsrWithID("new-id", 2, 0)
	if r := e.replica(); r.Log().TopicID() != "new-id" || r.Log().LogEndOffset() != 0 {
		t.Fatalf("t-0: topic id %q, LEO %d; want an empty log of new-id", r.Log().TopicID(), r.Log().LogEndOffset())
	}
}

// A log recording the listed topic's own id is of that topic, which was
// never deleted, and a topic's partitions are never taken away: a full
// view that does not list its partition is older than the log (each
// broker gets the controller's requests in order, so it should not
// happen). It is kept: deleting it could lose a live replica's records.
func TestFullMetadataKeepsALogOfTheListedTopicsID(t *testing.T) {
	e := newEnv(t)
	tp1 := TP{Topic: "t", Partition: 1}
	e.logOnDisk(tp0, "same-id")
	e.logOnDisk(tp1, "same-id")

	e.fullMetadataOf("same-id", 0)
	for _, tp := range []TP{tp0, tp1} {
		if !e.m.logs.Has(tp) {
			t.Errorf("the log of %v, of the listed topic id, was deleted", tp)
		}
	}
}

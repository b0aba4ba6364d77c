package replica

import (
	"testing"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
)

// A replica stopped without deletion (StopReplica with delete false, as a
// broker in controlled shutdown gets for the partitions it follows) keeps
// its log, and its HW must not fall back to the last checkpoint's: the
// checkpoint written afterwards (the broker's last, at its stop) holds the
// HW the replica had, and a replica made for the log again starts from it,
// as Kafka keeps the partition itself.
func TestStoppedReplicaKeepsItsHighWatermark(t *testing.T) {
	fsys := vfs.NewMem()
	e := &env{t: t, clock: newManualClock(), ctrl: newFakeController(), ctrlEpoch: 1, fs: fsys}
	e.net = &memNet{ctrl: e.ctrl, managers: map[string]*Manager{}}
	var logs *logstore.Manager
	e.m, e.meta = e.newManagerWith(1, func(s LogStore) LogStore {
		logs = s.(logManager).m
		return s
	})
	e.updateMetadata()

	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	for _, v := range []string{"a", "b", "c"} {
		if err := e.produceOne(v); err != nil {
			t.Fatal(err)
		}
	}
	// The last checkpoint before the HW moves holds 0.
	if err := logs.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	e.followerFetch(2, 1, 3)
	e.followerFetch(3, 1, 3)
	if hw := e.hw(); hw != 3 {
		t.Fatalf("HW %d after both followers fetched at 3, want 3", hw)
	}

	stop := &controlv1.StopReplicaRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1],
		Partitions: []*controlv1.StopReplicaPartition{{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: 1}}}
	if _, err := e.m.StopReplica(stop); err != nil {
		t.Fatal(err)
	}
	if err := logs.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	hws, err := logstore.ReadOffsetCheckpoint(fsys, "/data", "replication-offset-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if hws[tp0] != 3 {
		t.Errorf("the checkpoint after the stop holds HW %d for %s, want the stopped replica's 3", hws[tp0], tp0)
	}

	// Made again, as a follower in the next leader epoch.
	e.state(2, 2, 2, []int32{1, 2, 3}, nil)
	if hw := e.hw(); hw != 3 {
		t.Errorf("the replica made again starts at HW %d, want the stopped replica's 3", hw)
	}
}

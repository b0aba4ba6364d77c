package broker

import (
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/replica"
)

// ReplicaSizeBytes is the size of a hosted replica's log on disk: what a
// reassignment's progress and the replication throttle's tests compare.
func (b *Broker) ReplicaSizeBytes(topic string, partition int32) (int64, bool) {
	r, ok := b.rm.Replica(replica.TP{Topic: topic, Partition: partition})
	if !ok {
		return 0, false
	}
	if st, ok := r.Log().(interface{ Stats() logstore.Stats }); ok {
		return st.Stats().SizeBytes, true
	}
	return 0, false
}

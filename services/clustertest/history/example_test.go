package history_test

import (
	"fmt"
	"time"

	"tidemark.io/services/clustertest/history"
)

// A runner records what its clients did, reads the cluster once quiet,
// and asks the checker.
func ExampleCheck() {
	rec := history.NewRecorder()
	tp := history.TP{Topic: "orders", Partition: 0}
	id := rec.Start("producer-1", true, tp, history.AcksAll, "v0")
	rec.Acked(id, 0)
	id = rec.Start("producer-1", true, tp, history.AcksAll, "v1")
	rec.Acked(id, 1)
	stopped := rec.Event(history.Heal, "every fault healed")

	// Broker 2's replica lost v1 and nobody noticed.
	replica := func(broker int32, values ...string) history.ReplicaState {
		r := history.ReplicaState{Broker: broker, Readable: true, LEO: int64(len(values)), HW: int64(len(values))}
		for i, v := range values {
			r.Records = append(r.Records, history.Record{Offset: int64(i), Value: v})
		}
		return r
	}
	final := history.Final{FaultsStopped: stopped, Partitions: []history.PartitionState{{
		TP: tp, Leader: 2, ISR: []int32{1, 2}, MinInsyncReplicas: 2, LiveAt: stopped.Add(time.Second),
		Replicas: []history.ReplicaState{replica(1, "v0", "v1"), replica(2, "v0")},
	}}}
	rep := history.Check(rec.History(), final, history.Options{
		Durable:       map[string]bool{"orders": history.Promised(2, false)},
		LivenessBound: 10 * time.Second,
	})
	for _, v := range rep.Violations {
		fmt.Println(v.Kind, v.TP, v.Offset)
	}
	// Output:
	// lost-acked-write orders-0 1
	// replicas-diverge orders-0 1
	// not-live orders-0 -1
	// not-linearizable orders-0 -1
}

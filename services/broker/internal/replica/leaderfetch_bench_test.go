package replica

import (
	"context"
	"testing"
)

// BenchmarkLeaderFollowerFetch is the leader's side of the follower fetches
// an acks=all write waits for: one that brings the record, and one that is
// already caught up (the fetch that carries the follower's new offset). Its
// allocations per fetch are what to watch: several fetches run per write.
func BenchmarkLeaderFollowerFetch(b *testing.B) {
	e := newEnv(b)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	if _, err := e.m.Produce(context.Background(), tp0, 1, batch("a"), 0); err != nil {
		b.Fatal(err)
	}
	leo := e.replica().Log().LogEndOffset()
	for _, bc := range []struct {
		name   string
		offset int64
	}{{"records", leo - 1}, {"caught-up", leo}} {
		b.Run(bc.name, func(b *testing.B) {
			f := FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2],
				Partitions: []FollowerFetchPartition{{TP: tp0, FetchOffset: bc.offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: 1}}}
			b.ReportAllocs()
			for range b.N {
				answers := e.m.ReplicaFetch(context.Background(), f)
				if a := answers[0]; a.Err != nil || a.Diverging != nil {
					b.Fatalf("fetch answered %+v", a)
				}
				e.m.RecycleFetch(answers)
			}
		})
	}
}

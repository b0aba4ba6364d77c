package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
)

// BenchmarkGroupCommits: 10 members of one group (static members, joined
// in one delayed first rebalance) commit their partition's offset of a
// 10-partition topic in a loop, each commit one acks=all write to
// __consumer_offsets (3 brokers, replication factor 3, min.insync.replicas
// 2) and each answer's partition code checked. It prints commits/s and
// the commit latency percentiles.
func BenchmarkGroupCommits(b *testing.B) {
	const members = 10
	c := Start(b, Options{Brokers: 3, AdjustController: OffsetsPartitions(10), BrokerSettings: map[string]string{
		"group.min.session.timeout.ms": "100", "group.initial.rebalance.delay.ms": "1000"}})
	g := Groups{c}
	// The members commit offsets of a topic that exists (the coordinator
	// refuses others, UNKNOWN_TOPIC_OR_PARTITION, which is no commit to
	// time), once the coordinator has loaded its partition and knows the
	// topic: the joins below are sent once.
	c.CreateTopic("orders", members, 3, map[string]string{"min.insync.replicas": "2"})
	g.CommitOffset("bench", "orders", 0)
	api := g.On(g.Coordinator("bench"))
	joined := make([]*groupv1.JoinGroupResponse, members)
	var wg sync.WaitGroup
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := api.JoinGroup(context.Background(), &groupv1.JoinGroupRequest{GroupId: "bench", SessionTimeoutMs: 30000,
				GroupInstanceId: fmt.Sprintf("member-%d", i), ProtocolType: "consumer", Protocols: RangeProtocol, ClientId: "bench"})
			if err != nil {
				b.Error(err)
				return
			}
			joined[i] = r
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	for i, j := range joined {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &groupv1.SyncGroupRequest{GroupId: "bench", GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(),
				GroupInstanceId: fmt.Sprintf("member-%d", i)}
			for _, m := range j.GetMembers() {
				req.Assignments = append(req.Assignments, &groupv1.SyncGroupAssignment{MemberId: m.GetMemberId()})
			}
			if _, err := api.SyncGroup(context.Background(), req); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}

	lat := make([][]time.Duration, members)
	b.ResetTimer()
	start := time.Now()
	for i, j := range joined {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := b.N / members
			if i < b.N%members {
				n++
			}
			for k := range n {
				t0 := time.Now()
				resp, err := api.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "bench", GenerationId: j.GetGenerationId(),
					MemberId: j.GetMemberId(), GroupInstanceId: fmt.Sprintf("member-%d", i),
					Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: int32(i), CommittedOffset: int64(k)}}}}})
				if err == nil {
					err = CommitRefused(resp) // a refused partition is no commit to time
				}
				if err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		b.Fatal("no commit")
	}
	reportLatencies(b, all, elapsed, len(all))
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "commits/s")
}

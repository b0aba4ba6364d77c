package broker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// syntheticReplica is one hosted replica's state in the benchmark: a third
// lead with two followers, as on a broker of an RF 3 cluster.
type syntheticReplica struct {
	instance     *int
	topic        string
	partition    int32
	leo, size    int64
	leader       bool
	followerLags [2]int64
}

func syntheticBroker(n int) []syntheticReplica {
	out := make([]syntheticReplica, n)
	for i := range out {
		out[i] = syntheticReplica{instance: new(int), topic: fmt.Sprintf("topic-%04d", i/10), partition: int32(i % 10),
			leo: 1_000_000 + int64(i), size: 64 << 20, leader: i%3 == 0}
	}
	return out
}

// snapshot builds fresh progress messages, as Broker.progress does.
func snapshot(reps []syntheticReplica) []hostedProgress {
	out := make([]hostedProgress, len(reps))
	for i, r := range reps {
		p := &controlv1.ReplicaProgress{Topic: r.topic, Partition: r.partition, BrokerId: 1, LogEndOffset: r.leo,
			HighWatermark: r.leo, LogStartOffset: 1000, LeaderEpoch: 7, Leader: r.leader, SizeBytes: r.size}
		if r.leader {
			p.MaximalIsr = []int32{1, 2, 3}
			p.Followers = []*controlv1.FollowerProgress{{BrokerId: 2, LogEndOffset: r.leo, LagMs: r.followerLags[0]},
				{BrokerId: 3, LogEndOffset: r.leo, LagMs: r.followerLags[1]}}
		}
		out[i] = hostedProgress{instance: r.instance, p: p}
	}
	return out
}

func reportSize(replicas []*controlv1.ReplicaProgress, rep progressReport) int {
	return proto.Size(&controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: 123456,
		Replicas: replicas, FullReport: rep.full, Removed: rep.removed})
}

// BenchmarkProgressReportBytes compares the bytes of one session report
// before (every hosted replica every 500 ms: full-B/report) and with deltas
// (delta-B/report between the periodic full reports; amortized-B/report
// counts those in), on an idle broker and with one partition taking writes.
// Caught-up followers' ages jitter below 500 ms on every report. Run with
// -benchtime 120x: 60 s of reports, so two periodic full reports.
func BenchmarkProgressReportBytes(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, moving := range []bool{false, true} {
			name := fmt.Sprintf("replicas=%d/idle", n)
			if moving {
				name = fmt.Sprintf("replicas=%d/one-moving", n)
			}
			b.Run(name, func(b *testing.B) {
				reps := syntheticBroker(n)
				rng := rand.New(rand.NewPCG(1, 2))
				r := newProgressReporter()
				now := time.Unix(1_000_000, 0)
				r.next(now, snapshot(reps)) // the session's first report
				var fullBytes, deltaBytes, deltaReports, amortizedBytes int
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					now = now.Add(sessionReportInterval)
					for i := range reps {
						if reps[i].leader {
							reps[i].followerLags = [2]int64{rng.Int64N(500), rng.Int64N(500)}
						}
					}
					if moving {
						reps[0].leo += 100
						reps[0].size += 100 << 10
					}
					hosted := snapshot(reps)
					all := make([]*controlv1.ReplicaProgress, len(hosted))
					for i, h := range hosted {
						all[i] = h.p
					}
					fullBytes += reportSize(all, progressReport{})
					b.StartTimer()
					rep := r.next(now, hosted)
					size := reportSize(rep.replicas, rep)
					amortizedBytes += size
					if !rep.full {
						deltaBytes += size
						deltaReports++
					}
				}
				b.ReportMetric(float64(fullBytes)/float64(b.N), "full-B/report")
				b.ReportMetric(float64(deltaBytes)/float64(max(1, deltaReports)), "delta-B/report")
				b.ReportMetric(float64(amortizedBytes)/float64(b.N), "amortized-B/report")
			})
		}
	}
}

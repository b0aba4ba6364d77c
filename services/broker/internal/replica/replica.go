package replica

import (
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/topicconfig"
)

// Replica is one partition hosted on this broker: its log, its replication
// state machine, and the requests parked on it.
//
// Lock rule: mu guards state and serialises every change of the log's
// contents with role changes (appends as leader or follower, truncations,
// MakeLeader/MakeFollower), so no append can land between a role change and
// the epoch bookkeeping it requires. Log reads do not take mu: the log is
// safe for concurrent readers. Never hold mu while waiting on the network.
type Replica struct {
	tp  TP
	log Log

	mu    lockorder.Mutex[lockorder.Replica]
	state *partition.Partition
	cfg   topicconfig.TopicConfig
	// cfgVersion is what cfg was resolved from (metadata cache versions):
	// UpdateMetadata skips replicas whose inputs did not change.
	cfgVersion metadata.ConfigVersion
	// followerCached is the log.follower.cached.bytes the log was last
	// configured with: a dynamic broker config, not in cfg.
	followerCached int64
	// producerExpiration is the producer.id.expiration.ms the log was last
	// configured with, another dynamic broker config.
	producerExpiration time.Duration
	// fetchEpoch is the leader epoch this replica follows with, set when the
	// fetcher took it over; a fetch answer for another epoch is dropped.
	fetchEpoch int32
	// leaderSince is the leader epoch in which this broker last became
	// leader (-1: never). Leadership held continuously since an append's
	// epoch keeps that append valid across later epochs of the same leader.
	leaderSince int32
	// yielded, when set, is the state at which this leader promised the
	// controller to take no writes (guarded by mu; yield.go).
	yielded *yieldMark
	// cutUnseen: a follower truncation cut records and the consumer
	// fetches parked here (KIP-392 reads) are not woken yet; they are once
	// the truncation settles (guarded by mu; fetcher.go).
	cutUnseen bool

	// dataWaiters are parked follower fetches, woken by leader appends;
	// hwWaiters are parked acks=all produces and consumer fetches, woken by
	// HW moves. Both are woken by role changes. Woken requests re-check
	// their own condition. Two sets keep a HW move from waking every
	// follower fetch for nothing (and an append from waking produces).
	dataWaiters watchers
	hwWaiters   watchers
	// lwWaiters are parked DeleteRecords requests, woken when a
	// follower's log start moves (the low watermark may have risen).
	lwWaiters watchers

	// commits remembers the last few follower fetches that moved the HW
	// (guarded by mu), so an acks=all produce can link its trace to the
	// fetch that committed it.
	commits  [8]commitMark
	nextMark int

	// hwWatch is the ISR pass's last sample of the HW (guarded by mu);
	// hwStalled its verdict, read by the metrics (hwwatch.go).
	hwWatch   hwWatch
	hwStalled atomic.Bool
}

// commitMark is one HW advance and the fetch span that caused it.
type commitMark struct {
	hw   int64
	span trace.SpanContext
}

func (r *Replica) markCommitLocked(hw int64, sc trace.SpanContext) {
	if !sc.IsValid() {
		return
	}
	r.commits[r.nextMark%len(r.commits)] = commitMark{hw, sc}
	r.nextMark++
}

// committedByLocked returns the earliest remembered fetch whose HW advance
// covered offset required-1.
func (r *Replica) committedByLocked(required int64) (trace.SpanContext, bool) {
	var best commitMark
	for _, m := range r.commits {
		if m.span.IsValid() && m.hw >= required && (!best.span.IsValid() || m.hw < best.hw) {
			best = m
		}
	}
	return best.span, best.span.IsValid()
}

// epochSource adapts the log's leader-epoch cache to the state machine. It
// is the replica itself, seen through a pointer, so that handing it over as
// an interface allocates nothing (every follower fetch checks divergence).
type epochSource Replica

// epochs is the replica's log's epoch cache, for the state machine.
func (r *Replica) epochs() partition.EpochSource { return (*epochSource)(r) }

func (e *epochSource) EndOffsetFor(epoch int32) (int32, int64) { return e.log.EndOffsetForEpoch(epoch) }
func (e *epochSource) LatestEpoch() int32                      { return e.log.LatestEpoch() }

// TP returns the partition's name.
func (r *Replica) TP() TP { return r.tp }

// Log returns the replica's log.
func (r *Replica) Log() Log { return r.log }

// wake pokes every parked request on this replica.
func (r *Replica) wake() {
	r.dataWaiters.wakeAll()
	r.hwWaiters.wakeAll()
	r.lwWaiters.wakeAll()
}

// wakeData pokes parked follower fetches: new data to send.
func (r *Replica) wakeData() { r.dataWaiters.wakeAll() }

// wakeHW pokes parked produces and consumer fetches: the HW moved.
func (r *Replica) wakeHW() { r.hwWaiters.wakeAll() }

// Snapshot returns the state machine's view for dashboards and metrics.
func (r *Replica) Snapshot(now time.Time) partition.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.Snapshot(now)
}

// IsLeader reports whether this replica leads its partition.
func (r *Replica) IsLeader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.IsLeader()
}

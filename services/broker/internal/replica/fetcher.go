package replica

import (
	"context"
	"errors"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/telemetry"
)

// Backoffs of the follower fetchers.
const (
	// fetchBackoff is replica.fetch.backoff.ms: the pause after a failed
	// round trip to the leader.
	fetchBackoff = time.Second
	// epochBackoff is the pause for a partition whose leader has not yet
	// caught up with our leader epoch (UNKNOWN_LEADER_EPOCH): it will soon.
	epochBackoff = 50 * time.Millisecond
	// fetchRPCTimeout bounds one round trip beyond its max wait
	// (replica.socket.timeout.ms).
	fetchRPCTimeout = 10 * time.Second
)

// fetcherKey identifies a fetcher: num.replica.fetchers per source broker
// (F1), each fetching all of its partitions in one request.
type fetcherKey struct {
	leader int32
	index  int
}

type fetcherManager struct {
	m        *Manager
	mu       lockorder.Mutex[lockorder.FetcherManager]
	fetchers map[fetcherKey]*fetcher
	assigned map[TP]fetcherKey
	closed   bool
	// batching counts control requests being applied (batch); while any
	// is, changes do not cut round trips short, and the fetchers changed
	// are cut once when the last one ends.
	batching int
	changed  map[*fetcher]bool
	// running counts the fetchers' goroutines, retired ones included, so
	// close waits for every one.
	running sync.WaitGroup
}

func newFetcherManager(m *Manager) *fetcherManager {
	return &fetcherManager{m: m, fetchers: map[fetcherKey]*fetcher{}, assigned: map[TP]fetcherKey{}, changed: map[*fetcher]bool{}}
}

// batch defers the cuts of round trips in flight (fetcher.cut) until end
// is called: a control request's partitions are removed from their
// fetchers one by one as they are applied, then handed to fetchers
// together, and a fetcher cut at each of a thousand changes would send as
// many round trips only to cut them short again.
func (fm *fetcherManager) batch() (end func()) {
	fm.mu.Lock()
	fm.batching++
	fm.mu.Unlock()
	return func() {
		fm.mu.Lock()
		defer fm.mu.Unlock()
		if fm.batching--; fm.batching > 0 {
			return
		}
		for f := range fm.changed {
			f.cut()
		}
		clear(fm.changed)
	}
}

// changedLocked has f cut its round trip short, now or when the batch
// ends. fm.mu held.
func (fm *fetcherManager) changedLocked(f *fetcher) {
	if fm.batching > 0 {
		fm.changed[f] = true
		return
	}
	f.cut()
}

// fetchState is a partition's follower progress inside a fetcher.
type fetchState struct {
	r           *Replica
	epoch       int32 // the leader epoch we follow
	truncating  bool  // must settle truncation (KIP-279 loop) before fetching
	delayedTill time.Time
	// stuck is the last divergence (or out-of-range, resume) answer and
	// the log's state after acting on it (fetcher goroutine only): the same
	// answer again with the log unchanged means acting on it did nothing
	// and the next fetch would be the same too, so the partition backs off
	// instead of spinning (which also ended the leader's long poll for
	// every partition of the request).
	stuck  *noProgress
	warned bool
	// inSync: the log caught up to the leader's HW (Kafka's
	// PartitionFetchState.isReplicaInSync, lag = HW - LEO <= 0); the
	// follower throttle holds back only replicas that are not. It is
	// measured on the first answer of a leader epoch (unknown before:
	// not in sync, as in Kafka) and then only on answers that brought
	// records: an empty answer, such as one the leader's own throttle
	// held, says nothing about how far behind the log is.
	inSync, lagKnown bool
}

// takeCutLocked reports whether records were cut since the consumers
// parked on st's replica were last woken, and forgets it: the caller wakes
// them after unlocking. It is called once the truncation settles, when the
// replica knows where the new leader's epochs end: woken earlier, a read
// checks its last fetched epoch against a log that does not (a bare
// OFFSET_OUT_OF_RANGE). r.mu held.
func (st *fetchState) takeCutLocked() bool {
	cut := st.r.cutUnseen
	st.r.cutUnseen = false
	return cut
}

// noProgress is an answer from the leader and the log state it left.
type noProgress struct {
	answer      string
	leo         int64
	latestEpoch int32
}

// checkProgress records an answer with st's log state after acting on it
// (LEO and latest epoch) and reports whether the previous answer was the
// same and left the same state: no progress. It warns once per stuck
// spell. r.mu held.
func (f *fetcher) checkProgress(st *fetchState, answer string) bool {
	r := st.r
	now := noProgress{answer: answer, leo: r.log.LogEndOffset(), latestEpoch: r.log.LatestEpoch()}
	again := st.stuck != nil && *st.stuck == now
	st.stuck = &now
	if again && !st.warned {
		st.warned = true
		f.m.log.Warn("follower makes no progress: the leader keeps giving the same answer; backing off",
			"topic", r.tp.Topic, "partition", r.tp.Partition, "leader", f.key.leader, "leader_epoch", st.epoch,
			"answer", answer, "leo", now.leo, "latest_epoch", now.latestEpoch, "backoff", fetchBackoff)
	}
	return again
}

// progressed forgets a stuck spell once a fetch went through.
func (st *fetchState) progressed() {
	st.stuck, st.warned = nil, false
}

// add hands a follower replica to the fetcher for its leader.
func (fm *fetcherManager) add(r *Replica) { fm.addAll([]*Replica{r}) }

// addAll hands follower replicas to the fetchers of their leaders, each
// fetcher's share in one step: a fetcher parked in a long poll is cut short
// once for the lot (fetcher.cut), not once per partition.
func (fm *fetcherManager) addAll(rs []*Replica) {
	n := max(int(fm.m.BrokerConfig().NumReplicaFetchers), 1)
	type added struct {
		tp TP
		st *fetchState
	}
	byKey := map[fetcherKey][]added{}
	var keys []fetcherKey // in first-seen order, so fetchers start in request order
	for _, r := range rs {
		r.mu.Lock()
		leader, epoch := r.state.Leader(), r.state.LeaderEpoch()
		r.mu.Unlock()
		if leader < 0 || leader == fm.m.opts.BrokerID {
			continue
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(tpKey(r.tp)))
		key := fetcherKey{leader: leader, index: int(h.Sum32() % uint32(n))}
		if _, ok := byKey[key]; !ok {
			keys = append(keys, key)
		}
		byKey[key] = append(byKey[key], added{r.tp, &fetchState{r: r, epoch: epoch, truncating: true}})
	}
	if len(keys) == 0 {
		return
	}

	fm.mu.Lock()
	defer fm.mu.Unlock()
	if fm.closed {
		return
	}
	for _, key := range keys {
		f, ok := fm.fetchers[key]
		if !ok {
			f = newFetcher(fm.m, fm, key)
			fm.fetchers[key] = f
			fm.running.Add(1)
			go func() {
				defer fm.running.Done()
				f.run()
			}()
		}
		parts := map[TP]*fetchState{}
		for _, a := range byKey[key] {
			if old, ok := fm.assigned[a.tp]; ok && old != key {
				fm.fetchers[old].remove(a.tp)
				fm.changedLocked(fm.fetchers[old])
			}
			fm.assigned[a.tp] = key
			parts[a.tp] = a.st
		}
		f.add(parts)
		fm.changedLocked(f)
	}
}

// remove stops fetching a partition (it became leader, was stopped, or was
// fenced until new metadata arrives).
func (fm *fetcherManager) remove(tp TP) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if key, ok := fm.assigned[tp]; ok {
		fm.fetchers[key].remove(tp)
		fm.changedLocked(fm.fetchers[key])
		delete(fm.assigned, tp)
	}
}

func (fm *fetcherManager) close() {
	fm.mu.Lock()
	fm.closed = true
	fs := make([]*fetcher, 0, len(fm.fetchers))
	for _, f := range fm.fetchers {
		fs = append(fs, f)
	}
	fm.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
	fm.running.Wait()
}

// retire drops f once it has no partitions left: its goroutine ends and
// closes its stream. Idle fetchers used to stay for good, one goroutine
// per leader and fetcher index ever followed, which reassignments and
// elections kept adding to. Every add runs under fm.mu too, so no partition
// is handed to a fetcher that is leaving: the next add for its key starts a
// new one. It reports whether f was retired.
func (fm *fetcherManager) retire(f *fetcher) bool {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if fm.fetchers[f.key] != f || !f.empty() {
		return false
	}
	delete(fm.fetchers, f.key)
	delete(fm.changed, f)
	// A partition f dropped by itself (fenced) is still assigned to it.
	for tp, key := range fm.assigned {
		if key == f.key {
			delete(fm.assigned, tp)
		}
	}
	f.stop()
	return true
}

// count is the number of fetchers.
func (fm *fetcherManager) count() int {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return len(fm.fetchers)
}

// fetcher is one ReplicaFetcherThread: a goroutine pulling every partition
// it owns from one leader in one batched request per round.
type fetcher struct {
	m   *Manager
	fm  *fetcherManager
	key fetcherKey
	// phases times its rounds (tidemark_broker_replica_fetch_seconds).
	phases fetchPhases
	mu     lockorder.Mutex[lockorder.Fetcher]
	part   map[TP]*fetchState
	// gen counts changes of part (under mu). trip is the fetch round trip
	// in flight (nil between round trips): the gen its request was built
	// from and how to cut it short when part changes under it.
	gen  uint64
	trip *fetchTrip
	// tripSlot is the one fetchTrip trip points to, reused round after
	// round: only one round trip is in flight, and a new context per round
	// trip (with its watch) was a fifth of a follower's allocations.
	tripSlot fetchTrip
	kick     chan struct{}
	ctx      context.Context
	stop     context.CancelFunc
	done     chan struct{}
	// stream is the long-lived ReplicaFetch stream to the leader.
	stream fetchStream
	// prevHW remembers the leader HW last seen per partition, so the
	// follower can tell a round trip that moved it.
	prevHW map[TP]int64
	// roundEnded is when the last round's answers were applied (zero after
	// a round that ended otherwise), for the "between" phase. Only the
	// fetcher's goroutine touches it.
	roundEnded time.Time
	// flushes are the round's partitions with gaps to flush before they
	// are fetched (gapflush.go), reused round after round. Only the
	// fetcher's goroutine touches it.
	flushes []gapFlush
}

func newFetcher(m *Manager, fm *fetcherManager, key fetcherKey) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &fetcher{m: m, fm: fm, key: key, phases: m.metrics.fetchPhases(key.leader), part: map[TP]*fetchState{}, kick: make(chan struct{}, 1),
		ctx: ctx, stop: cancel, done: make(chan struct{}), prevHW: map[TP]int64{}, stream: fetchStream{clock: m.clock}}
}

// fetchTrip is a fetch round trip in flight: the partition set it was
// built from, and whether it was cut short. Its stream is cancelled by a
// cut only while the exchange waits for the answer (armed).
type fetchTrip struct {
	gen   uint64
	state atomic.Int32 // tripIdle, tripArmed or tripCut
	// cancel is the stream's, set by the fetcher's goroutine before it
	// arms the trip; interrupt reads it only after seeing it armed.
	cancel context.CancelFunc
}

const (
	tripIdle  int32 = iota // not waiting on the stream
	tripArmed              // waiting: a cut cancels the stream
	tripCut                // cut short: its answer is discarded
)

// arm makes a cut cancel the stream from now on; false: the trip was cut
// already.
func (t *fetchTrip) arm(cancel context.CancelFunc) bool {
	t.cancel = cancel
	return t.state.CompareAndSwap(tripIdle, tripArmed)
}

// disarm ends the window in which a cut cancels the stream and reports
// whether the trip was cut (before or during it).
func (t *fetchTrip) disarm() (cut bool) {
	return !t.state.CompareAndSwap(tripArmed, tripIdle) && t.state.Load() == tripCut
}

// interrupt cuts the trip short, cancelling its stream if the exchange is
// waiting on it. The fetcher's mu is held (cut).
func (t *fetchTrip) interrupt() {
	if t.state.Swap(tripCut) == tripArmed {
		t.cancel()
	}
}

// add sets the fetch states of parts (a replaced state is dropped).
func (f *fetcher) add(parts map[TP]*fetchState) {
	f.mu.Lock()
	for tp := range parts {
		delete(f.prevHW, tp)
	}
	maps.Copy(f.part, parts)
	f.changedLocked()
	f.mu.Unlock()
	f.wake()
}

// remove drops tp, waking the fetcher: one waiting out a partition's
// backoff may have nothing left to wait for, and goes (fetcherManager.retire).
func (f *fetcher) remove(tp TP) {
	f.mu.Lock()
	_, ok := f.part[tp]
	if ok {
		delete(f.part, tp)
		delete(f.prevHW, tp)
		f.changedLocked()
	}
	f.mu.Unlock()
	if ok {
		f.wake()
	}
}

// wake has an idle fetcher look at its partitions again.
func (f *fetcher) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// changedLocked notes a change of the fetcher's partitions: a round trip
// built from the old set is not sent, and one in flight is cut short by
// cut. f.mu held.
func (f *fetcher) changedLocked() {
	f.gen++
}

// cut cuts short the round trip in flight if it was built from an older
// partition set: it may be parked on the leader for up to
// replica.fetch.wait.max.ms, and a partition added meanwhile (a new
// follower after a failover) would wait that long for its first fetch, one
// removed would stay in the leader's parked request. The round trip's
// answer is discarded whole and the next request goes out at once with the
// new set. Only changes made outside the fetcher's goroutine (the fetcher
// manager's add and remove) cut, so there is no busy loop: at most one cut
// per change, or per control request (fetcherManager.batch).
func (f *fetcher) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.trip != nil && f.trip.gen != f.gen {
		f.trip.interrupt()
		f.trip = nil
	}
}

// beginTrip registers a round trip built from the partitions of generation
// gen and returns it, cut when they change. It refuses (the caller builds a
// new request) if they changed since.
func (f *fetcher) beginTrip(gen uint64) (*fetchTrip, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen != gen {
		return nil, false
	}
	// The last trip is over (endTrip): nothing can cut it any more.
	t := &f.tripSlot
	t.gen, t.cancel = gen, nil
	t.state.Store(tripIdle)
	f.trip = t
	return t, true
}

// endTrip forgets the round trip in flight.
func (f *fetcher) endTrip() {
	f.mu.Lock()
	f.trip = nil
	f.mu.Unlock()
}

// empty reports whether the fetcher has no partitions.
func (f *fetcher) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.part) == 0
}

// owns reports whether st is still the fetcher's state for tp.
func (f *fetcher) owns(tp TP, st *fetchState) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.part[tp] == st
}

// removeIf stops fetching tp only if st is still its state: a newer state
// (a new leader epoch handed over meanwhile) stays.
func (f *fetcher) removeIf(tp TP, st *fetchState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.part[tp] == st {
		delete(f.part, tp)
		delete(f.prevHW, tp)
		f.changedLocked()
	}
}

func (f *fetcher) close() {
	f.stop()
	<-f.done
}

// snapshot returns the partitions ready to work on, split by phase, the
// earliest time a delayed one is due, and the generation of the set.
func (f *fetcher) snapshot(now time.Time) (truncating, fetching map[TP]*fetchState, next time.Time, gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gen = f.gen
	// Made only when something goes in (truncation is rare): this runs
	// before every fetch round trip. A nil map reads as empty.
	for tp, st := range f.part {
		if now.Before(st.delayedTill) {
			if next.IsZero() || st.delayedTill.Before(next) {
				next = st.delayedTill
			}
			continue
		}
		if st.truncating {
			if truncating == nil {
				truncating = make(map[TP]*fetchState, 1)
			}
			truncating[tp] = st
		} else {
			if fetching == nil {
				fetching = make(map[TP]*fetchState, len(f.part))
			}
			fetching[tp] = st
		}
	}
	return truncating, fetching, next, gen
}

func (f *fetcher) delay(tp TP, d time.Duration) {
	f.mu.Lock()
	if st, ok := f.part[tp]; ok {
		st.delayedTill = f.m.now().Add(d)
	}
	f.mu.Unlock()
}

func (f *fetcher) leaderClient() (replicationv1.ReplicationServiceClient, error) {
	b, ok := f.m.opts.Meta.Broker(f.key.leader)
	if !ok {
		return nil, kerr.New(kerr.BrokerNotAvailable, "leader broker %d is not in the metadata", f.key.leader)
	}
	return f.m.transport.Replication(b.Address)
}

func (f *fetcher) run() {
	defer close(f.done)
	defer f.stream.close()
	for f.ctx.Err() == nil {
		truncating, fetching, next, gen := f.snapshot(f.m.now())
		if len(truncating) == 0 && len(fetching) == 0 {
			var wait <-chan time.Time
			var t Timer
			if next.IsZero() {
				// Nothing left to fetch from this leader (no partition is
				// delayed either): the fetcher goes, and its stream with
				// it, or the leader's handler would wait on it for good
				// (and hold up that broker's graceful stop).
				if f.fm.retire(f) {
					return
				}
				f.stream.close()
			} else {
				t = f.m.clock.NewTimer(next.Sub(f.m.now()))
				wait = t.C()
			}
			select {
			case <-f.kick:
			case <-wait:
			case <-f.ctx.Done():
			}
			if t != nil {
				t.Stop() // not deferred: this loop lives as long as the fetcher
			}
			continue
		}
		if f.m.opts.Faults.LinkCut(f.key.leader) {
			// The link to the leader is cut (fault injection): nothing sent
			// would arrive, so send nothing, epoch lookups included, until
			// it heals.
			f.stream.close()
			_ = f.m.opts.Faults.AwaitLink(f.ctx, f.key.leader)
			continue
		}
		client, err := f.leaderClient()
		if err != nil {
			f.m.log.Debug("fetcher has no leader address", "leader", f.key.leader, "err", err)
			f.backoffAll(fetchBackoff)
			continue
		}
		if len(truncating) > 0 {
			f.truncate(client, truncating)
			// A partition whose truncation just settled takes part in this
			// round's fetch, not the next one: the round's fetch may park
			// on the leader for its max wait. A partition added meanwhile
			// settles its truncation first, for the same reason.
			var again map[TP]*fetchState
			again, fetching, next, gen = f.snapshot(f.m.now())
			if arrivedSince(again, truncating) {
				continue
			}
		}
		if len(fetching) > 0 {
			f.fetch(client, fetching, gen, next)
		}
	}
}

// arrivedSince reports whether now holds a partition state that was not in
// before (one that stayed, a truncation skipped or unsettled, does not
// count, or the fetcher would ask again at once).
func arrivedSince(now, before map[TP]*fetchState) bool {
	for tp, st := range now {
		if before[tp] != st {
			return true
		}
	}
	return false
}

// backoffAll idles the fetcher for d, or until its partitions change (add
// and remove kick it), as Kafka's fetcher thread waits out fetch.backoff.ms
// on its partition map's condition. A partition removed while the fetcher
// backs off may have been its last (it then goes at once, retire), and one
// added has nothing to wait for: a leader that failed the others may serve
// it. Each change ends at most one backoff early, so a failing leader is not
// asked in a loop.
func (f *fetcher) backoffAll(d time.Duration) {
	t := f.m.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-f.kick:
	case <-f.ctx.Done():
	}
}

// pause idles the fetcher for d whatever changes meanwhile: an injected link
// delay is not cut short.
func (f *fetcher) pause(d time.Duration) {
	t := f.m.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-f.ctx.Done():
	}
}

// stillFollowing reports whether st is still the replica's current follower
// state (no leadership change since the fetcher took it).
func stillFollowing(st *fetchState) bool {
	return st.r.state.Role() == partition.RoleFollower && st.r.state.LeaderEpoch() == st.epoch
}

// truncate settles where each new follower's log must be cut before it
// fetches: to its HW in the legacy high-watermark mode, else by asking the
// leader where our latest epoch ends (OffsetForLeaderEpoch, the KIP-279
// loop). Fetching then also checks divergence on every round (F13).
func (f *fetcher) truncate(client replicationv1.ReplicationServiceClient, parts map[TP]*fetchState) {
	ask := map[TP]int32{}
	for tp, st := range parts {
		r := st.r
		r.mu.Lock()
		if !stillFollowing(st) {
			r.mu.Unlock()
			continue
		}
		fs := r.state.StartFetching(r.epochs())
		if fs.TruncateTo != partition.UndefinedOffset {
			f.truncateLocked(st, fs.TruncateTo, "high watermark")
		}
		settled := fs.LastFetchedEpoch == partition.NoEpoch
		if settled {
			st.truncating = false
		} else {
			ask[tp] = fs.LastFetchedEpoch
		}
		wake := settled && st.takeCutLocked()
		r.mu.Unlock()
		if wake {
			r.wakeHW() // consumers reading from this follower: the cut is settled
		}
	}
	for round := 0; len(ask) > 0 && round < 8 && f.ctx.Err() == nil; round++ {
		req := &replicationv1.OffsetForLeaderEpochRequest{ReplicaId: f.m.opts.BrokerID, BrokerEpoch: f.m.opts.BrokerEpoch()}
		for tp, e := range ask {
			req.Partitions = append(req.Partitions, &replicationv1.OffsetForLeaderEpochPartition{
				Topic: tp.Topic, Partition: tp.Partition, CurrentLeaderEpoch: parts[tp].epoch, LeaderEpoch: e})
		}
		ctx, cancel := context.WithTimeout(f.ctx, fetchRPCTimeout)
		resp, err := client.OffsetForLeaderEpoch(ctx, req)
		cancel()
		if err != nil {
			// A fetcher closing (a stop, the leader moving) cancels the
			// call itself: that is no failure to report.
			if f.ctx.Err() == nil {
				f.m.log.Warn("OffsetForLeaderEpoch failed", "leader", f.key.leader, "err", kerr.FromStatus(err))
			}
			f.backoffAll(fetchBackoff)
			return
		}
		next := map[TP]int32{}
		for _, res := range resp.GetPartitions() {
			tp := TP{Topic: res.GetTopic(), Partition: res.GetPartition()}
			st, ok := parts[tp]
			if !ok {
				continue
			}
			if code := kerr.Code(res.GetErrorCode()); code != kerr.None {
				f.partitionFailed(st, code)
				continue
			}
			r := st.r
			r.mu.Lock()
			wake := false
			if stillFollowing(st) {
				answer := partition.EpochEndOffset{Epoch: res.GetLeaderEpoch(), EndOffset: res.GetEndOffset()}
				tr := r.state.OnDivergingEpoch(answer, r.epochs())
				f.truncateLocked(st, tr.Offset, "leader epoch")
				if tr.Done {
					st.truncating = false
					r.state.OnLeaderEpochEnd(ask[tp], answer)
					wake = st.takeCutLocked()
				} else {
					next[tp] = r.log.LatestEpoch()
				}
			}
			r.mu.Unlock()
			if wake {
				r.wakeHW() // consumers reading from this follower: the cut is settled
			}
		}
		ask = next
	}
	for tp := range ask {
		// Still asking after every round: the answers did not converge.
		// Retry after a pause rather than at once.
		if f.ctx.Err() == nil {
			f.m.log.Warn("leader epoch truncation did not settle; backing off", "topic", tp.Topic, "partition", tp.Partition,
				"leader", f.key.leader, "last_epoch_asked", ask[tp], "backoff", fetchBackoff)
			f.delay(tp, fetchBackoff)
		}
	}
}

// truncateLocked cuts st's log to offset. At or beyond the LEO no record
// goes, but the log still drops epoch entries starting at the LEO (Kafka's
// truncateTo): an epoch this replica led without writing, which the leader
// does not have; kept, it would be sent as LastFetchedEpoch and draw the
// same divergence answer for ever. r.mu held.
func (f *fetcher) truncateLocked(st *fetchState, offset int64, why string) {
	r := st.r
	if offset < 0 {
		return
	}
	leo, epochBefore := r.log.LogEndOffset(), r.log.LatestEpoch()
	newLEO, err := r.log.TruncateTo(offset)
	if err != nil {
		f.m.log.Error("truncation failed", "topic", r.tp.Topic, "partition", r.tp.Partition, "offset", offset, "err", err)
		return
	}
	if newLEO == leo {
		if after := r.log.LatestEpoch(); after != epochBefore {
			f.m.log.Info("Truncating to offset "+itoa(offset)+" removes no record; dropped leader epochs starting at the log end "+itoa(leo),
				"topic", r.tp.Topic, "partition", r.tp.Partition, "latest_epoch_before", epochBefore, "latest_epoch", after, "by", why)
		}
		return
	}
	r.cutUnseen = true
	hw := r.state.OnTruncated(newLEO)
	// Below the log start the log starts again at the new end.
	r.state.SetLogStartOffset(r.log.LogStartOffset())
	f.m.metrics.truncations.Inc()
	if newLEO < hw.Before {
		// Records this replica held as committed are gone (an unclean
		// election, or a replica that lost its disk): Kafka's fetcher warns
		// "Truncating <tp> to offset X below high watermark Y".
		f.m.log.Warn("Truncating to offset "+itoa(newLEO)+" below high watermark "+itoa(hw.Before),
			"topic", r.tp.Topic, "partition", r.tp.Partition, "from_leo", leo, "high_watermark", hw.Before,
			"leader_epoch", st.epoch, "by", why)
	}
	_, span := f.m.tracer.Start(context.Background(), "broker.truncate", trace.WithAttributes(
		attribute.String("tidemark.topic", r.tp.Topic), attribute.Int("tidemark.partition", int(r.tp.Partition)),
		attribute.Int64("tidemark.leo.before", leo), attribute.Int64("tidemark.leo.after", newLEO),
		attribute.Int("tidemark.leader_epoch", int(st.epoch)), attribute.String("tidemark.reason", why)))
	span.End()
	msg := "Truncating to offset " + itoa(newLEO) + " (leader epoch " + itoa(int64(st.epoch)) + ")"
	f.m.log.Info(msg, "topic", r.tp.Topic, "partition", r.tp.Partition, "from_leo", leo, "by", why)
	f.m.emit(Event{Kind: "truncation", TP: r.tp, Reason: msg + " by " + why, LeaderEpoch: st.epoch})
}

// fetch runs one batched ReplicaFetch round over parts, the partitions of
// generation gen, and applies the answers; next is when the earliest
// partition held back by a delay is due (zero: none).
func (f *fetcher) fetch(client replicationv1.ReplicationServiceClient, parts map[TP]*fetchState, gen uint64, next time.Time) {
	prevEnded := f.roundEnded
	f.roundEnded = time.Time{}
	cfg := f.m.BrokerConfig()
	mode := f.m.truncationMode()
	req := &replicationv1.ReplicaFetchRequest{
		ReplicaId: f.m.opts.BrokerID, BrokerEpoch: f.m.opts.BrokerEpoch(),
		MaxWaitMs: min(cfg.ReplicaFetchWaitMaxMs, MaxFetchWaitMs), MinBytes: cfg.ReplicaFetchMinBytes, MaxBytes: cfg.ReplicaFetchResponseMaxBytes,
	}
	var delay time.Duration
	held := 0
	for tp, st := range parts {
		fault := f.m.opts.Faults.For(tp)
		if fault.Stall {
			continue
		}
		delay = max(delay, fault.Delay)
		r := st.r
		r.mu.Lock()
		if !stillFollowing(st) {
			r.mu.Unlock()
			continue
		}
		if _, hold := f.m.followerThrottleLocked(r, st.inSync); hold {
			r.mu.Unlock()
			held++
			continue
		}
		last := r.log.LatestEpoch()
		if mode == partition.TruncateHighWatermark {
			last = partition.NoEpoch // pre-0.11: no epoch checks
		}
		p := &replicationv1.ReplicaFetchPartition{
			Topic: tp.Topic, Partition: tp.Partition, FetchOffset: r.log.LogEndOffset(),
			CurrentLeaderEpoch: st.epoch, LastFetchedEpoch: last, LogStartOffset: r.log.LogStartOffset(),
			PartitionMaxBytes: cfg.ReplicaFetchMaxBytes,
		}
		r.mu.Unlock()
		// The fetch offset tells the leader these records are replicated;
		// those after a compaction gap must be durable first, or a crash
		// of every replica cuts them (logstore.Log.FlushGaps). Flushed with
		// the partition's lock released (reads from this follower need
		// it), side by side with the round's other such flushes.
		if r.log.GapsUnflushed() {
			f.flushes = append(f.flushes, gapFlush{tp: tp, log: r.log, p: p})
			continue
		}
		req.Partitions = append(req.Partitions, p)
	}
	req.Partitions = f.flushGaps(req.Partitions)
	if len(req.Partitions) == 0 && held > 0 {
		// Held back by the follower throttle: look again soon, so the rate
		// does not fall far below the limit while waiting (the stream
		// stays open: the leader waits on it only that long).
		f.backoffAll(throttleBackoff)
		return
	}
	if len(req.Partitions) == 0 {
		// Everything is stalled by fault injection, or no longer followed
		// (a leadership change the fetcher manager is about to remove):
		// idle a wait period, or until the partitions change, without a
		// stream the leader would wait on meanwhile.
		f.stream.close()
		f.backoffAll(time.Duration(cfg.ReplicaFetchWaitMaxMs) * time.Millisecond)
		return
	}
	if delay > 0 {
		f.pause(delay)
	}
	if !next.IsZero() {
		// A partition backing off briefly (UNKNOWN_LEADER_EPOCH: the leader
		// has not applied its new epoch yet, 50 ms) must not wait out the
		// others' long poll: the leader answers when it is due.
		if d := next.Sub(f.m.now()); d < time.Duration(req.MaxWaitMs)*time.Millisecond {
			req.MaxWaitMs = int32(max((d+time.Millisecond-1)/time.Millisecond, 1))
		}
	}
	trip, ok := f.beginTrip(gen)
	if !ok {
		return // the partitions changed since parts was taken: build again
	}
	sent := f.m.now()
	if !prevEnded.IsZero() {
		f.phases.between.Observe(sent.Sub(prevEnded).Seconds())
	}
	resp, err := f.roundTrip(trip, client, req, time.Duration(req.MaxWaitMs)*time.Millisecond+fetchRPCTimeout)
	f.endTrip()
	answered := f.m.now()
	f.phases.roundTrip.Observe(answered.Sub(sent).Seconds())
	if errors.Is(err, errFetchInterrupted) {
		// Cut short by a change of the partitions: nothing of it is
		// applied, no offset moves; the next request asks again from the
		// same offsets, at once. (Or the fetcher is closing.)
		if f.ctx.Err() == nil {
			f.m.metrics.fetchInterrupts.Inc()
		}
		return
	}
	if err != nil {
		if f.ctx.Err() == nil {
			f.m.log.Warn("fetch from leader failed", "leader", f.key.leader, "partitions", len(req.Partitions), "err", kerr.FromStatus(err))
			f.backoffAll(fetchBackoff)
		}
		return
	}
	if code := kerr.Code(resp.GetErrorCode()); code != kerr.None {
		f.m.log.Warn("leader refused the fetch", "leader", f.key.leader, "code", code.String())
		f.backoffAll(fetchBackoff)
		return
	}
	for _, a := range resp.GetPartitions() {
		tp := TP{Topic: a.GetTopic(), Partition: a.GetPartition()}
		if st, ok := parts[tp]; ok {
			f.apply(st, a)
		}
	}
	f.roundEnded = f.m.now()
	f.phases.apply.Observe(f.roundEnded.Sub(answered).Seconds())
}

// apply handles one partition's answer on the follower. An answer to a
// fetch made for an older leader epoch is dropped: the replica has moved on
// (and its new fetch state must not be touched by the old answer).
// partitionFailed is the follower's reaction to a partition's error in
// its leader's answer, a fetch's or an OffsetForLeaderEpoch's alike (the
// latter retried every error at once, FENCED_LEADER_EPOCH included, and
// cut the other partitions' long polls short each time).
func (f *fetcher) partitionFailed(st *fetchState, code kerr.Code) {
	tp := st.r.tp
	switch code {
	case kerr.FencedLeaderEpoch:
		// F3: our epoch is stale; stop until the controller tells us more.
		f.m.log.Warn("fetch fenced: waiting for new metadata", "topic", tp.Topic, "partition", tp.Partition, "leader_epoch", st.epoch)
		f.m.emit(Event{Kind: "fenced", TP: tp, Reason: "follower fetch fenced at leader epoch " + itoa(int64(st.epoch)), LeaderEpoch: st.epoch})
		f.removeIf(tp, st)
	case kerr.UnknownLeaderEpoch, kerr.NotLeaderOrFollower, kerr.UnknownTopicOrPartition:
		// Usually a leadership change in flight: the controller's next
		// message settles it soon, so retry quickly.
		f.delay(tp, epochBackoff)
	default:
		f.m.log.Debug("fetch error", "topic", tp.Topic, "partition", tp.Partition, "code", code.String())
		f.delay(tp, fetchBackoff)
	}
}

func (f *fetcher) apply(st *fetchState, a *replicationv1.ReplicaFetchPartitionResponse) {
	r := st.r
	r.mu.Lock()
	current := stillFollowing(st) && f.owns(r.tp, st)
	r.mu.Unlock()
	if !current {
		return
	}
	// The follower's reactions are protocol steps (truncate, stop until the
	// controller speaks, back off), finer than the kerr table's retry and
	// refresh columns, so they stay here.
	switch code := kerr.Code(a.GetErrorCode()); code {
	case kerr.None:
	case kerr.OffsetOutOfRange:
		r.mu.Lock()
		if stillFollowing(st) {
			f.outOfRangeLocked(st, a)
		}
		r.mu.Unlock()
		return
	default:
		f.partitionFailed(st, code)
		return
	}

	r.mu.Lock()
	if !stillFollowing(st) {
		r.mu.Unlock()
		return
	}
	if d := a.GetDivergingEpoch(); d != nil {
		div := partition.EpochEndOffset{Epoch: d.GetEpoch(), EndOffset: d.GetEndOffset()}
		tr := r.state.OnDivergingEpoch(div, r.epochs())
		f.truncateLocked(st, tr.Offset, "diverging epoch")
		stuck := f.checkProgress(st, "diverging "+div.String())
		wake := tr.Done && st.takeCutLocked()
		r.mu.Unlock()
		if wake {
			r.wakeHW() // consumers reading from this follower: the cut is settled
		}
		if stuck {
			f.delay(r.tp, fetchBackoff)
		}
		return
	}
	st.progressed()
	if recs := a.GetRecords(); len(recs) > 0 {
		// Flushed, where needed, before the next fetch (see fetch).
		if _, err := r.log.AppendAsFollowerUnflushed(recs); err != nil {
			r.mu.Unlock()
			f.m.log.Error("follower append failed", "topic", r.tp.Topic, "partition", r.tp.Partition, "err", err)
			if errors.Is(err, logstore.ErrNonContiguous) {
				st.truncating = true
			}
			f.delay(r.tp, fetchBackoff)
			return
		}
		if listed, _ := f.m.followerThrottleLocked(r, true); listed {
			f.m.followerQuota().Record(len(recs))
		}
	}
	if len(a.GetRecords()) > 0 || !st.lagKnown {
		st.inSync, st.lagKnown = r.log.LogEndOffset() >= a.GetHighWatermark(), true
	}
	startMoved := false
	if ls := a.GetLogStartOffset(); ls > r.log.LogStartOffset() && ls <= r.log.LogEndOffset() {
		// Follow the leader's retention and DeleteRecords.
		if err := r.log.AdvanceLogStartOffset(ls, min(a.GetHighWatermark(), r.log.LogEndOffset())); err == nil {
			r.state.SetLogStartOffset(r.log.LogStartOffset())
			startMoved = true
		}
	}
	upd := r.state.OnFetchResponse(a.GetHighWatermark(), r.log.LogEndOffset())
	// An answer with no divergence: the log agrees with the leader's, so
	// any cut before it is settled.
	cut := st.takeCutLocked()
	r.mu.Unlock()
	if startMoved {
		// On disk before the next fetch reports it: the leader's
		// DeleteRecords answers on that report.
		if err := f.m.persistLogStart(r.tp); err != nil {
			f.m.log.Warn("log start not checkpointed", "topic", r.tp.Topic, "partition", r.tp.Partition, "err", err)
		}
	}
	if upd.Changed() || len(a.GetRecords()) > 0 || cut {
		r.wakeHW() // consumers reading from this follower (KIP-392)
	}
}

// outOfRangeLocked is F14.
func (f *fetcher) outOfRangeLocked(st *fetchState, a *replicationv1.ReplicaFetchPartitionResponse) {
	r := st.r
	act := partition.OutOfRange(r.log.LogEndOffset(), a.GetLeaderLogEndOffset(), a.GetLogStartOffset())
	switch act.Kind {
	case partition.TruncateToLeaderEnd:
		f.truncateLocked(st, act.Offset, "out of range")
	case partition.TruncateFully:
		if err := r.log.TruncateFullyAndStartAt(act.Offset); err != nil {
			f.m.log.Error("full truncation failed", "topic", r.tp.Topic, "partition", r.tp.Partition, "err", err)
			return
		}
		r.cutUnseen = true
		r.state.OnTruncated(r.log.LogEndOffset())
		r.state.SetLogStartOffset(r.log.LogStartOffset())
		f.m.log.Info("Truncating fully and starting at offset "+itoa(act.Offset), "topic", r.tp.Topic, "partition", r.tp.Partition)
	case partition.ResumeAt:
		// The next fetch is this one again: unless the leader's state
		// moves, it gets the same answer, so do not ask at once.
		if f.checkProgress(st, "out of range, "+act.String()) {
			f.delay(r.tp, fetchBackoff)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// roundTrip sends one fetch on the fetcher's stream to the leader and
// waits for its answer (errFetchInterrupted once the trip is cut), inside
// the follower's own client span, so the span can be marked with what the
// leader reports (whether this round trip moved the HW) and the exporter
// keeps only the round trips that did. The trace
// context travels in the request: the stream outlives any one trace.
func (f *fetcher) roundTrip(trip *fetchTrip, client replicationv1.ReplicationServiceClient, req *replicationv1.ReplicaFetchRequest, timeout time.Duration) (*replicationv1.ReplicaFetchResponse, error) {
	ctx, span := f.m.tracer.Start(f.ctx, telemetry.ReplicaFetchSpan, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("tidemark.follower_id", int(f.m.opts.BrokerID)),
			attribute.Int("tidemark.leader_id", int(f.key.leader)), attribute.Int("tidemark.partitions", len(req.Partitions)))
	}
	if span.SpanContext().IsValid() {
		req.TraceContext = map[string]string{}
		otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(req.TraceContext))
	}
	resp, err := f.stream.exchange(f.ctx, trip, client, req, timeout)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	if adv := resp.GetHwAdvances(); len(adv) > 0 && span.IsRecording() {
		parts := make([]string, 0, len(adv))
		for _, a := range adv {
			parts = append(parts, hwAdvanceText(TP{Topic: a.GetTopic(), Partition: a.GetPartition()}, a.GetBefore(), a.GetAfter()))
		}
		span.SetAttributes(attribute.Bool(telemetry.AttrHWAdvanced, true), attribute.String("tidemark.hw.advances", strings.Join(parts, ",")))
	}
	return resp, nil
}

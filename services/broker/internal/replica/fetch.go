package replica

import (
	"context"
	"time"

	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
)

// DefaultFetchMaxBytes is a consumer fetch's limit when it gives none.
const DefaultFetchMaxBytes = 1 << 20

// ConsumerFetch is a client's fetch of one partition.
type ConsumerFetch struct {
	TP                 TP
	Offset             int64
	MaxBytes           int
	MinBytes           int
	MaxWait            time.Duration
	Rack               string
	CurrentLeaderEpoch int32 // -1 skips the check
	// LastFetchedEpoch, when HasLastFetchedEpoch, is the epoch of the last
	// record the consumer read, checked against this replica's epochs
	// (KIP-320): a log that diverged answers Diverging and no records.
	LastFetchedEpoch    int32
	HasLastFetchedEpoch bool
	// TopicID, when set, is the topic id the consumer's offset is in
	// (KIP-516): a log of another id (the topic was deleted and created
	// again) answers UNKNOWN_TOPIC_ID, not the new topic's records.
	TopicID string
	// FitOnly reads only whole batches that fit in MaxBytes: none when the
	// first is larger, and none at all for MaxBytes 0 (Kafka's
	// minOneMessage false, for a Kafka fetch's partitions after the first
	// that brought records). Without it the first batch comes whole
	// whatever its size (KIP-74) and MaxBytes 0 is the default.
	FitOnly bool
}

// ConsumerFetchResult is what a consumer fetch returns.
type ConsumerFetchResult struct {
	Records              []byte // whole batches in the log's format
	HighWatermark        int64
	LogStartOffset       int64
	LogEndOffset         int64
	NextOffset           int64
	PreferredReadReplica int32
	// Diverging, when set, is where the log the consumer read from ends at
	// or below its last fetched epoch: before the offset it asked for.
	Diverging *partition.EpochEndOffset
	// TopicID is the id of the topic the log belongs to ("" if none yet).
	TopicID string
	// buf is the pooled buffer Records aliases (Release).
	buf *[]byte
}

// Fetch serves a consumer: records below the HW only (F6). A consumer that
// sends no rack must fetch from the leader; one that sends a rack may read
// from a follower, up to the follower's own HW, and the leader may point it
// at an in-sync replica in its rack (KIP-392, F26). With nothing to return
// it waits up to MaxWait for MinBytes (the fetch purgatory, F18).
func (m *Manager) Fetch(ctx context.Context, f ConsumerFetch) (res ConsumerFetchResult, err error) {
	start := m.now()
	defer func() {
		m.metrics.consumerFetchLat.Observe(m.now().Sub(start).Seconds())
		m.metrics.consumerOut.Add(float64(len(res.Records)))
	}()
	return m.fetch(ctx, f)
}

func (m *Manager) fetch(ctx context.Context, f ConsumerFetch) (ConsumerFetchResult, error) {
	r, err := m.hosted(f.TP)
	if err != nil {
		return ConsumerFetchResult{}, err
	}
	if f.MaxBytes <= 0 && !f.FitOnly {
		f.MaxBytes = DefaultFetchMaxBytes
	}
	// Watch before reading so no HW move between the read and parking is missed.
	w := newWaiter()
	defer releaseWaiter(w)
	r.hwWaiters.add(w)
	defer r.hwWaiters.remove(w)
	var deadline <-chan time.Time
	for {
		// Checked after every wake, and once watching, so a StopReplica
		// between the look-up above and the watch is not missed either.
		if err := m.stillHosted(r); err != nil {
			return ConsumerFetchResult{}, err
		}
		res, err := m.readForConsumer(r, f)
		if err != nil || res.PreferredReadReplica >= 0 || res.Diverging != nil || len(res.Records) >= max(f.MinBytes, 1) || f.MaxWait <= 0 {
			return res, err
		}
		// Parked: the next read replaces this one, or it is returned as
		// it is (its buffer then goes back with the reply).
		if deadline == nil {
			t := m.clock.NewTimer(f.MaxWait)
			defer t.Stop()
			deadline = t.C()
			m.metrics.parkedFetch.Add(1)
			defer m.metrics.parkedFetch.Add(-1)
		}
		select {
		case <-w.ch:
			res.Release()
		case <-deadline:
			res.Release()
			return m.readForConsumer(r, f)
		case <-ctx.Done():
			return res, nil
		case <-m.stop:
			return res, nil
		}
	}
}

// stillHosted answers a parked fetch woken on a replica StopReplica took
// away. Left a leaderless follower, the replica still passes a follower
// read that names no leader epoch, and nothing wakes it any more.
func (m *Manager) stillHosted(r *Replica) error {
	if cur, err := m.hosted(r.tp); err != nil || cur == r {
		return err
	}
	return m.withLeaderHint(r.tp, kerr.New(kerr.NotLeaderOrFollower,
		"broker %d made %s-%d again while the fetch was parked", m.opts.BrokerID, r.tp.Topic, r.tp.Partition))
}

// topicIDMismatch is the answer to a read naming topic id f.TopicID of a
// log whose id is id. Where the metadata names the reader's id too, the
// log is a stray of the deleted topic not replaced yet:
// INCONSISTENT_TOPIC_ID, retriable, as Kafka answers. Otherwise the
// reader's topic was deleted (and created again): UNKNOWN_TOPIC_ID.
func (m *Manager) topicIDMismatch(f ConsumerFetch, id string) error {
	if m.opts.Meta.TopicID(f.TP.Topic) == f.TopicID {
		return kerr.New(kerr.InconsistentTopicID, "%s-%d: this broker's log is topic id %s, not %s yet", f.TP.Topic, f.TP.Partition, id, f.TopicID)
	}
	return kerr.New(kerr.UnknownTopicID,
		"%s-%d is topic id %s now, not %s: the topic was deleted and created again", f.TP.Topic, f.TP.Partition, id, f.TopicID)
}

func (m *Manager) readForConsumer(r *Replica, f ConsumerFetch) (ConsumerFetchResult, error) {
	id := r.log.TopicID()
	now := m.now()
	r.mu.Lock()
	if err := r.state.ValidateRead(f.CurrentLeaderEpoch, f.Rack == ""); err != nil {
		r.mu.Unlock()
		return ConsumerFetchResult{}, m.withLeaderHint(f.TP, err)
	}
	// After the leadership check: a broker that no longer serves the
	// partition says so, whatever log it still holds.
	if f.TopicID != "" && id != "" && f.TopicID != id {
		r.mu.Unlock()
		return ConsumerFetchResult{}, m.topicIDMismatch(f, id)
	}
	if r.state.IsLeader() {
		if err := m.fencedLocked(r, now); err != nil {
			r.mu.Unlock()
			return ConsumerFetchResult{}, err
		}
	}
	res := ConsumerFetchResult{
		HighWatermark:        r.state.MaxReadableOffset(),
		LogStartOffset:       r.log.LogStartOffset(),
		LogEndOffset:         r.log.LogEndOffset(),
		NextOffset:           f.Offset,
		PreferredReadReplica: partition.NoReplica,
		TopicID:              id,
	}
	if f.HasLastFetchedEpoch {
		div, diverged, err := r.state.CheckDivergence(f.LastFetchedEpoch, f.Offset, r.epochs())
		if err != nil || diverged {
			r.mu.Unlock()
			if diverged {
				res.Diverging = &div
			}
			return res, err
		}
	}
	if f.Rack != "" && r.state.IsLeader() {
		res.PreferredReadReplica = r.state.PreferredReadReplica(f.Rack, f.Offset, m.rackOf, now)
		if res.PreferredReadReplica == m.opts.BrokerID {
			res.PreferredReadReplica = partition.NoReplica
		}
	}
	r.mu.Unlock()
	if res.PreferredReadReplica >= 0 {
		return res, nil
	}
	if f.FitOnly && f.MaxBytes <= 0 {
		return m.offsetsOnly(r, f, res)
	}
	rr, buf, err := readPooled(r.log, f.Offset, f.MaxBytes, res.HighWatermark)
	if err != nil {
		if buf != nil {
			putReadBuffer(buf)
		}
		if cut, ok := m.cutUnderRead(r, f, err); ok {
			return cut, nil
		}
		return res, err
	}
	res.Records, res.NextOffset, res.buf = rr.Records, rr.NextOffset, buf
	if f.FitOnly && len(res.Records) > f.MaxBytes {
		// Only a first batch larger than MaxBytes goes over it: the
		// read is answered with no records, as Kafka's.
		res.Release()
		res.Records, res.NextOffset = nil, f.Offset
	}
	return res, nil
}

// offsetsOnly answers a read given no bytes (FitOnly, MaxBytes 0) as
// Kafka's log read of 0 bytes: no records, only the offsets, or
// OFFSET_OUT_OF_RANGE for an offset outside the log.
func (m *Manager) offsetsOnly(r *Replica, f ConsumerFetch, res ConsumerFetchResult) (ConsumerFetchResult, error) {
	if f.Offset >= res.LogStartOffset && f.Offset <= res.LogEndOffset {
		return res, nil
	}
	err := kerr.New(kerr.OffsetOutOfRange, "offset %d is outside the log [%d, %d]", f.Offset, res.LogStartOffset, res.LogEndOffset)
	if cut, ok := m.cutUnderRead(r, f, err); ok {
		return cut, nil
	}
	return res, err
}

// cutUnderRead answers a read whose offset a follower's truncation took
// away between the epoch check and the log read: checked again, the
// consumer learns where the logs part (KIP-320) rather than get a bare
// OFFSET_OUT_OF_RANGE and reset by policy.
func (m *Manager) cutUnderRead(r *Replica, f ConsumerFetch, readErr error) (ConsumerFetchResult, bool) {
	if !f.HasLastFetchedEpoch || kerr.CodeOf(readErr) != kerr.OffsetOutOfRange {
		return ConsumerFetchResult{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	div, diverged, err := r.state.CheckDivergence(f.LastFetchedEpoch, f.Offset, r.epochs())
	if err != nil || !diverged {
		return ConsumerFetchResult{}, false
	}
	return ConsumerFetchResult{
		HighWatermark: r.state.MaxReadableOffset(), LogStartOffset: r.log.LogStartOffset(), LogEndOffset: r.log.LogEndOffset(),
		NextOffset: f.Offset, PreferredReadReplica: partition.NoReplica, Diverging: &div, TopicID: r.log.TopicID(),
	}, true
}

func (m *Manager) rackOf(id int32) string {
	if id == m.opts.BrokerID {
		return m.opts.Rack
	}
	if b, ok := m.opts.Meta.Broker(id); ok {
		return b.Rack
	}
	return ""
}

// Who a ListOffsets is for, by Kafka's replica_id (ReplicaManager.fetchOffset).
const (
	// ConsumerReplicaID is a client's lookup: bounded by the HW (with no
	// transactions also the last stable offset), on the leader only.
	ConsumerReplicaID int32 = -1
	// DebuggingReplicaID is a debugging tool's lookup: the whole log (up
	// to the LEO), answered by any replica, leader or follower.
	DebuggingReplicaID int32 = -2
)

// ListOffsets answers earliest (log start), latest, by timestamp (the first
// offset at or after it) and max timestamp (the first record carrying the
// largest timestamp). As Kafka, only a client's lookup (replicaID -1) is
// bounded by the HW, what consumers can read, and waits while a new
// leader's HW lags its epoch's start; any other replicaID (a broker id, or
// -2) sees the log up to its LEO, and -2 is answered by a follower too.
func (m *Manager) ListOffsets(tp TP, spec OffsetSpec, ts int64, currentLeaderEpoch, replicaID int32) (offset, timestamp int64, epoch int32, err error) {
	r, err := m.hosted(tp)
	if err != nil {
		return 0, 0, 0, err
	}
	client := replicaID == ConsumerReplicaID
	r.mu.Lock()
	if err := r.state.ValidateRead(currentLeaderEpoch, replicaID != DebuggingReplicaID); err != nil {
		r.mu.Unlock()
		return 0, 0, 0, m.withLeaderHint(tp, err)
	}
	hw, epoch, epochStart := r.state.HighWatermark(), r.state.LeaderEpoch(), r.state.EpochStartOffset()
	r.mu.Unlock()
	// What the lookup may answer: below the HW for a client, the LEO else.
	bound := hw
	if !client {
		bound = r.log.LogEndOffset()
	}
	// A new leader's HW may still lag behind the start of its epoch (its
	// followers have not fetched yet): its "latest" would be below what the
	// old leader already exposed, so a consumer resetting to it would go
	// back. Kafka answers OFFSET_NOT_AVAILABLE until the HW catches up.
	lagging := func() error {
		if client && epochStart != partition.UndefinedOffset && epochStart > hw {
			return kerr.New(kerr.OffsetNotAvailable, "%s: the high watermark %d of leader epoch %d is behind the epoch's start offset %d", tp, hw, epoch, epochStart)
		}
		return nil
	}
	// As Kafka: the epoch an offset was written in, from the leader-epoch
	// cache for the log start and from the batch for a timestamp's record,
	// so a consumer that resets there checks its log against the right
	// epoch (KIP-320); latest is the current epoch, and no record none.
	switch spec {
	case OffsetEarliest:
		start := r.log.LogStartOffset()
		return start, -1, r.log.EpochForOffset(start), nil
	case OffsetLatest:
		if err := lagging(); err != nil {
			return 0, 0, 0, err
		}
		return bound, -1, epoch, nil
	case OffsetTimestamp:
		to, found, err := r.log.OffsetForTimestamp(ts, bound)
		if err != nil {
			return 0, 0, 0, err
		}
		if !found {
			if err := lagging(); err != nil {
				return 0, 0, 0, err
			}
			return -1, -1, -1, nil
		}
		return to.Offset, to.Timestamp, to.LeaderEpoch, nil
	case OffsetMaxTimestamp:
		// As Kafka's fetchOffsetForTimestamp: the log's largest timestamp
		// is found whatever the HW, and answered only when its record is
		// below the bound; otherwise as a timestamp nothing reaches.
		to, found, err := r.log.MaxTimestampOffset()
		if err != nil {
			return 0, 0, 0, err
		}
		if !found || to.Offset >= bound {
			if err := lagging(); err != nil {
				return 0, 0, 0, err
			}
			return -1, -1, -1, nil
		}
		return to.Offset, to.Timestamp, to.LeaderEpoch, nil
	}
	return 0, 0, 0, kerr.BadField(kerr.InvalidRequest, "spec", "must be EARLIEST, LATEST, TIMESTAMP or MAX_TIMESTAMP")
}

// OffsetSpec selects what ListOffsets looks up.
type OffsetSpec int

const (
	OffsetEarliest OffsetSpec = iota + 1
	OffsetLatest
	OffsetTimestamp
	OffsetMaxTimestamp
)

// EpochEndOffset answers OffsetForLeaderEpoch on the leader: the largest
// epoch <= the one asked and where it ends in this log (F12).
func (m *Manager) EpochEndOffset(tp TP, currentLeaderEpoch, epoch int32) (int32, int64, error) {
	r, err := m.hosted(tp)
	if err != nil {
		return -1, -1, err
	}
	r.mu.Lock()
	err = r.state.ValidateRead(currentLeaderEpoch, true)
	r.mu.Unlock()
	if err != nil {
		return -1, -1, m.withLeaderHint(tp, err)
	}
	e, off := r.log.EndOffsetForEpoch(epoch)
	return e, off, nil
}

// Metadata views for handlers.
func (m *Manager) Meta() *metadata.Cache { return m.opts.Meta }

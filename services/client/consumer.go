package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// Consumer reads one partition from a position up to the high watermark,
// following it as it grows. Its methods may be called from any goroutine
// but run one at a time.
type Consumer struct {
	c    *Client
	opts ConsumerOptions

	mu  sync.Mutex // guards everything below; held for the whole of Poll
	pos int64      // the next offset to read; < 0 means OffsetEarliest/OffsetLatest, to resolve
	// lastEpoch is the leader epoch of the last batch read up to pos, sent
	// so the broker can say whether the log was truncated under it
	// (KIP-320); StartLeaderEpoch at first; -1 when the position was set
	// rather than read to.
	lastEpoch   int32
	truncations int64
	hw          int64
	logStart    int64
	preferred   int32 // the replica to fetch from (KIP-392), -1 for the leader
	prefUntil   time.Time
	// A read replica whose fetch failed is avoided until avoidUntil, for a
	// time that grows with its consecutive failures (avoidFails), even as
	// the leader keeps naming it.
	avoided    int32
	avoidUntil time.Time
	avoidFails int
	readFrom   int32 // the broker the last fetch went to
	closed     bool
	// topicID is the id of the topic the position is in (KIP-516): a topic
	// deleted and created again under its name has another, and its
	// offsets are not this position's. "" until a fetch learns it.
	topicID string
	// topicIDUnread: topicID came from the metadata cache for a position
	// that was set, not read to (StartOffset, SetPosition), and no fetch
	// has been answered under it yet. The cache may be older than the
	// topic; the position is in the topic as the next fetch finds it, so a
	// newer id then is taken, not a recreation under the position.
	topicIDUnread bool
	// silentSince is when the first of the fetches the leader has left
	// unanswered since its last answer went out; zero when it answered.
	silentSince time.Time
}

// NewConsumer returns a consumer of one partition. It makes no request
// until the first Poll.
func NewConsumer(c *Client, opts ConsumerOptions) (*Consumer, error) {
	if c == nil {
		return nil, noClient()
	}
	opts, err := opts.resolve(c)
	if err != nil {
		return nil, err
	}
	return &Consumer{c: c, opts: opts, pos: opts.StartOffset, hw: -1, logStart: -1, preferred: -1, readFrom: -1, lastEpoch: opts.startEpoch(), avoided: -1}, nil
}

// positionAndEpoch is Position with the leader epoch of the record before
// it, as far as known (-1 when not), which a commit of the position names.
func (cs *Consumer) positionAndEpoch() (int64, int32) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.pos, cs.lastEpoch
}

// Position is the offset of the next record Poll returns, or
// OffsetEarliest/OffsetLatest before the first Poll resolves them.
func (cs *Consumer) Position() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.pos
}

// SetPosition moves the position to offset, OffsetEarliest or OffsetLatest,
// in the topic as the next fetch finds it.
func (cs *Consumer) SetPosition(offset int64) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.pos = max(offset, OffsetEarliest)
	cs.lastEpoch = -1
	cs.topicID = ""
}

// Truncations counts the times the log was found truncated under the
// position (LogTruncation) and the position moved back to where the log
// diverged, as a reset policy other than ResetNone does.
func (cs *Consumer) Truncations() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.truncations
}

// LogTruncation is Poll's error when the records before the position are
// no longer the partition's (KIP-320): an unclean election, or a leader
// that lost records it had served, replaced the log from DivergentOffset
// on. The records read from there up to Position may be gone or different.
// With ResetNone Poll returns it and keeps the position (SetPosition picks
// where to go on); otherwise the position moves back to DivergentOffset,
// the consumer reads on from there and Truncations counts it. As Kafka's
// LogTruncationException is an OffsetOutOfRangeException, its code is
// OFFSET_OUT_OF_RANGE (kerr.CodeOf), so a caller that resets on that code
// handles it too.
type LogTruncation struct {
	Topic           string
	Partition       int32
	Position        int64
	DivergentOffset int64
	// Epoch is the leader epoch the log diverged after.
	Epoch int32
}

// Unwrap gives the OFFSET_OUT_OF_RANGE error it is a case of.
func (e *LogTruncation) Unwrap() error {
	return kerr.New(kerr.OffsetOutOfRange, "%s", e.Error())
}

func (e *LogTruncation) Error() string {
	return fmt.Sprintf("%s-%d: log truncated under the consumer: records from offset %d up to its position %d were replaced (leader epoch %d ends at %d)",
		e.Topic, e.Partition, e.DivergentOffset, e.Position, e.Epoch, e.DivergentOffset)
}

// TopicRecreated is Poll's error when the topic was deleted and created
// again under its name since the position was taken (its topic id changed,
// KIP-516): the position is an offset of the old topic, and the new one's
// records below it are not the ones read. With ResetNone Poll returns it
// and keeps the position (SetPosition picks where to go on); otherwise the
// position moves where the Reset policy says, in the new topic. Its code
// is OFFSET_OUT_OF_RANGE (kerr.CodeOf), as for any position outside the log.
type TopicRecreated struct {
	Topic     string
	Partition int32
	Position  int64
	// OldID and NewID are the topic ids before and after.
	OldID, NewID string
}

// Unwrap gives the OFFSET_OUT_OF_RANGE error it is a case of.
func (e *TopicRecreated) Unwrap() error {
	return kerr.New(kerr.OffsetOutOfRange, "%s", e.Error())
}

func (e *TopicRecreated) Error() string {
	return fmt.Sprintf("%s-%d: the topic was deleted and created again (topic id %s, was %s): position %d is an offset of the old topic",
		e.Topic, e.Partition, e.NewID, e.OldID, e.Position)
}

// HighWatermark is the high watermark the last fetch reported (-1 before).
func (cs *Consumer) HighWatermark() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.hw
}

// LogStartOffset is the log start offset the last fetch reported (-1 before).
func (cs *Consumer) LogStartOffset() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.logStart
}

// ReadReplica is the broker id the last fetch went to (-1 before any).
func (cs *Consumer) ReadReplica() int32 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.readFrom
}

// Close ends the consumer; it holds no connection of its own.
func (cs *Consumer) Close() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	return nil
}

// Poll fetches the records from the position up to the high watermark
// (waiting up to MaxWait for some), advances the position past them, and
// returns them; none is not an error. Retriable errors are retried with
// backoff until ctx ends (or the API timeout, without a deadline). A fetch
// from a preferred read replica that fails falls back to the leader at
// once, and that replica is avoided for a while (avoidReplicaLocked).
// OFFSET_OUT_OF_RANGE and a topic created again (TopicRecreated) follow
// the Reset policy. Keys, values and headers are the caller's; they
// share one buffer per fetch.
func (cs *Consumer) Poll(ctx context.Context) ([]Record, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	what := fmt.Sprintf("poll %s-%d", cs.opts.Topic, cs.opts.Partition)
	if cs.closed {
		return nil, fmt.Errorf("%s: %w", what, ErrClosed)
	}
	ctx, cancel := cs.c.opts.withAPITimeout(ctx)
	defer cancel()
	var last error
	for attempt := 1; ; attempt++ {
		if err := cs.resolveLocked(ctx); err != nil {
			return nil, err
		}
		recs, follower, err := cs.fetchLocked(ctx)
		if err == nil {
			return recs, nil
		}
		if rc := (*TopicRecreated)(nil); errors.As(err, &rc) {
			if cs.opts.Reset == ResetNone {
				return nil, rc
			}
			cs.c.log.Warn("topic created again under the consumer; resetting", "topic", rc.Topic, "partition", rc.Partition,
				"position", rc.Position, "topic_id", rc.NewID, "was", rc.OldID, "policy", cs.opts.Reset)
			cs.resetLocked()
			cs.topicID, cs.preferred = rc.NewID, -1
			continue
		}
		if lt := (*LogTruncation)(nil); errors.As(err, &lt) {
			if cs.opts.Reset == ResetNone {
				return nil, lt
			}
			cs.c.log.Warn("log truncated under the consumer; reading on from where it diverged", "topic", lt.Topic, "partition", lt.Partition,
				"position", lt.Position, "divergent_offset", lt.DivergentOffset, "epoch", lt.Epoch)
			cs.pos, cs.lastEpoch = lt.DivergentOffset, lt.Epoch
			cs.truncations++
			continue
		}
		ke := toKerr(err)
		if ctx.Err() != nil {
			return nil, ctxError(ctx, lastOr(last, ke), "%s", what)
		}
		last = lastOr(last, ke)
		if follower {
			// KIP-392: on any trouble with the read replica, go back to the leader.
			cs.avoidReplicaLocked(ke)
			continue
		}
		if ke.Code == kerr.OffsetOutOfRange && cs.opts.Reset != ResetNone {
			cs.c.log.Debug("offset out of range; resetting", "offset", cs.pos, "policy", cs.opts.Reset)
			cs.resetLocked()
			continue
		}
		if !ke.Code.Retriable() {
			return nil, wrap(ke, "%s at offset %d", what, cs.pos)
		}
		if !sleep(ctx, backoff(cs.c.opts.RetryBackoff, cs.c.opts.RetryBackoffMax, attempt)) {
			return nil, ctxError(ctx, last, "%s", what)
		}
	}
}

// resetLocked moves the position where the Reset policy says.
func (cs *Consumer) resetLocked() {
	cs.pos, cs.lastEpoch = OffsetEarliest, -1
	if cs.opts.Reset == ResetLatest {
		cs.pos = OffsetLatest
	}
}

// checkTopicLocked compares the topic id the metadata gives (id) with the
// one the position is in, taking it when none is known yet, or when the
// known one came from the cache for a position no fetch has answered yet
// (topicIDUnread).
func (cs *Consumer) checkTopicLocked(id string) error {
	switch {
	case id == "" || id == cs.topicID:
		return nil
	case cs.topicID == "":
		cs.topicID, cs.topicIDUnread = id, true
		return nil
	case cs.topicIDUnread:
		cs.topicID = id // a newer id than the cache had: still no record read
		return nil
	}
	return &TopicRecreated{Topic: cs.opts.Topic, Partition: cs.opts.Partition, Position: cs.pos, OldID: cs.topicID, NewID: id}
}

// recreatedLocked asks the metadata again whether the topic is still the
// one the position is in, after an answer that says the log is not what
// the position expects (out of range, or diverging from the last epoch
// read): the cached topic id may be older than the topic. A refresh that
// fails tells nothing.
func (cs *Consumer) recreatedLocked(ctx context.Context) error {
	if cs.topicID == "" {
		return nil
	}
	if err := cs.c.meta.refresh(ctx, cs.opts.Topic); err != nil {
		return nil
	}
	return cs.checkTopicLocked(cs.c.meta.topicID(cs.opts.Topic))
}

// resolveLocked turns OffsetEarliest/OffsetLatest into an offset.
func (cs *Consumer) resolveLocked(ctx context.Context) error {
	if cs.pos >= 0 {
		return nil
	}
	spec := Earliest()
	if cs.pos == OffsetLatest {
		spec = Latest()
	}
	lo, err := cs.c.ListOffsets(ctx, cs.opts.Topic, cs.opts.Partition, spec)
	if err != nil {
		return err
	}
	cs.pos = lo.Offset
	return nil
}

// fetchLocked makes one fetch, from the preferred read replica when there
// is one, and reports whether it went to that replica.
func (cs *Consumer) fetchLocked(ctx context.Context) ([]Record, bool, error) {
	o := cs.opts
	r, err := cs.c.meta.leader(ctx, o.Topic, o.Partition)
	if err != nil {
		return nil, false, err
	}
	if err := cs.checkTopicLocked(r.topicID); err != nil {
		return nil, false, err
	}
	target, addr, follower := r.leader, r.addr, false
	if cs.preferred >= 0 && cs.preferred != r.leader && time.Now().Before(cs.prefUntil) {
		if a, ok := cs.c.meta.brokerAddr(cs.preferred); ok {
			target, addr, follower = cs.preferred, a, true
		}
	}
	wait := o.MaxWait
	if dl, ok := ctx.Deadline(); ok {
		// Leave the broker time to answer (perhaps empty) before ctx ends.
		wait = max(min(wait, time.Until(dl)*3/4), 0)
	}
	var resp *brokerv1.FetchResponse
	cs.readFrom = target
	sent := time.Now()
	err = cs.c.brokerCallTimeout(ctx, addr, o.RequestTimeout+wait, func(ctx context.Context, bc brokerv1.BrokerServiceClient) error {
		var err error
		req := &brokerv1.FetchRequest{
			Topic: o.Topic, Partition: o.Partition, Offset: cs.pos,
			MaxBytes: o.MaxBytes, MaxWaitMs: int32(wait.Milliseconds()), MinBytes: o.MinBytes,
			RackId: cs.rackLocked(), CurrentLeaderEpoch: r.leaderEpoch, RawBatches: true,
			TopicId: cs.topicID,
		}
		if cs.lastEpoch >= 0 {
			req.LastFetchedEpoch = &cs.lastEpoch
		}
		resp, err = bc.Fetch(ctx, req)
		return err
	})
	if err != nil {
		ke := toKerr(err)
		// From a read replica too: one that did not answer may be back on
		// another address, which only metadata tells (the leader names it
		// again by id, and its old address would fail every time);
		// NETWORK_EXCEPTION marks the partition for a refresh, which
		// brings the brokers' addresses.
		cs.c.meta.noteError(o.Topic, o.Partition, ke)
		if !follower {
			cs.noteSilenceLocked(ke.Code == kerr.RequestTimedOut, sent)
			if ke.Code == kerr.OffsetOutOfRange || ke.Code == kerr.UnknownTopicID {
				// Perhaps outside the log because the topic is another
				// one now; or the log says so, the fetch naming the
				// topic id the position is in (KIP-516).
				if err := cs.recreatedLocked(ctx); err != nil {
					return nil, false, err
				}
			}
		}
		return nil, follower, err
	}
	if follower {
		cs.avoided, cs.avoidFails = -1, 0
	} else {
		cs.noteSilenceLocked(false, sent)
	}
	if err := cs.checkTopicLocked(resp.GetTopicId()); err != nil {
		return nil, follower, err
	}
	cs.topicIDUnread = false
	cs.hw, cs.logStart = resp.GetHighWatermark(), resp.GetLogStartOffset()
	if d := resp.GetDivergingEpoch(); d != nil {
		// A topic created again diverges from the old one's epochs too.
		if err := cs.recreatedLocked(ctx); err != nil {
			return nil, follower, err
		}
		if d.GetEndOffset() < cs.pos {
			return nil, follower, &LogTruncation{Topic: o.Topic, Partition: o.Partition, Position: cs.pos,
				DivergentOffset: d.GetEndOffset(), Epoch: d.GetEpoch()}
		}
		// The epoch read last is gone, but the log still holds everything
		// below the position: read on, checked against the older epoch.
		cs.lastEpoch = d.GetEpoch()
		return nil, follower, nil
	}
	recs, next, epoch, err := decodeRecords(o.Topic, o.Partition, resp.GetRecordBatches(), cs.pos)
	if err != nil {
		return nil, follower, err
	}
	if next > cs.pos {
		cs.lastEpoch = epoch
	}
	cs.pos = next
	cs.notePreferredLocked(resp.GetPreferredReadReplica(), r.leader)
	return recs, follower, nil
}

// noteSilenceLocked follows how long the leader has left fetches
// unanswered. Poll deadlines may cut each fetch short of the request
// timeout, so the silence is counted across them; once it lasts the
// request timeout, the leader is looked up again (noteTimeout).
func (cs *Consumer) noteSilenceLocked(timedOut bool, sent time.Time) {
	switch {
	case !timedOut:
		cs.silentSince = time.Time{}
	case cs.silentSince.IsZero():
		cs.silentSince = sent
	}
	if timedOut && time.Since(cs.silentSince) >= cs.opts.RequestTimeout {
		cs.c.meta.noteTimeout(cs.opts.Topic, cs.opts.Partition)
		cs.silentSince = time.Time{}
	}
}

// notePreferredLocked follows a leader's preferred_read_replica (KIP-392),
// for metadata.max.age, as Kafka's consumer does; a replica avoided after
// failing is not taken up again before its time.
func (cs *Consumer) notePreferredLocked(pref, leader int32) {
	switch {
	case cs.opts.Rack == "" || pref < 0:
	case pref == cs.avoided && time.Now().Before(cs.avoidUntil):
		cs.preferred = -1
	case pref == leader:
		cs.preferred = -1
	case pref != cs.preferred:
		cs.preferred = pref
		cs.prefUntil = time.Now().Add(cs.c.opts.MetadataMaxAge)
		cs.c.log.Debug("fetching from preferred read replica", "topic", cs.opts.Topic, "partition", cs.opts.Partition, "replica", pref)
	}
}

// rackLocked is the rack a fetch names: none while a read replica is
// avoided, or the leader would name it again and answer without records.
func (cs *Consumer) rackLocked() string {
	if cs.avoided >= 0 && time.Now().Before(cs.avoidUntil) {
		return ""
	}
	return cs.opts.Rack
}

// avoidReplicaLocked goes back to the leader after a fetch from the read
// replica failed, and avoids that replica for a while. The leader answers a
// fetch naming the rack with the replica and no records; it named the
// failed one again at once, so the consumer went from failure to failure
// without a pause and read nothing until the replica answered or left the
// ISR. Meanwhile fetches go to the leader without the rack, and it serves
// them itself. The pause starts at retry.backoff.max.ms and doubles with
// each consecutive failure, up to metadata.max.age; a fetch from the
// replica that succeeds ends the count.
func (cs *Consumer) avoidReplicaLocked(err *kerr.Error) {
	if cs.avoided != cs.preferred {
		cs.avoided, cs.avoidFails = cs.preferred, 0
	}
	cs.avoidFails++
	o := cs.c.opts
	d := backoff(o.RetryBackoffMax, max(o.MetadataMaxAge, o.RetryBackoffMax), cs.avoidFails)
	cs.avoidUntil = time.Now().Add(d)
	cs.c.log.Debug("read replica failed; fetching from the leader", "topic", cs.opts.Topic, "partition", cs.opts.Partition,
		"replica", cs.preferred, "failures", cs.avoidFails, "avoided_for", d, "err", err)
	cs.preferred = -1
}

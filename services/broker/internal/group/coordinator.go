package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/recordbatch"
)

// PartitionFor is the __consumer_offsets partition of a group: Kafka's
// abs(groupId.hashCode()) % n, with Java's String.hashCode over UTF-16
// code units and Kafka's Utils.abs (MinInt32 maps to 0), so a Kafka client
// and tidemark agree on where a group lives.
func PartitionFor(group string, n int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// Options configure a Coordinator.
type Options struct {
	Host   Host
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tick is how often sessions, rebalance deadlines and leadership of the
	// offsets partitions are checked; 0 means 50ms.
	Tick time.Duration
	// Registry, when set, receives the group metrics.
	Registry prometheus.Registerer
}

// Coordinator is a broker's group coordinator: for every __consumer_offsets
// partition the broker leads, it loads the partition's groups and offsets
// and serves them; when leadership goes, it unloads them.
//
// Its mu is a leaf in the broker's lock order: it is held only around the
// pure state machine and maps, never across a call into the replica
// manager, the metadata cache or the network.
type Coordinator struct {
	host Host
	log  *slog.Logger
	now  func() time.Time
	tick time.Duration

	mu     lockorder.Mutex[lockorder.Leaf]
	shards map[int32]*shard
	// cleanupDue is when expire next runs the cleanup
	// (offsets.retention.check.interval.ms).
	cleanupDue time.Time
	// remote are the high watermarks of committed partitions this broker
	// does not host, for tidemark_group_lag.
	remote remoteHWs
	// applied counts the offsets put in place (a commit applied, a load
	// installed), numbering each (committed.applied): a sweep judges only
	// those applied before it read the metadata.
	applied uint64

	stop      chan struct{}
	closeOnce sync.Once
	// bg bounds the background writes; Close cancels it so a write
	// waiting for acks=all does not hold up a stopping broker.
	bg       context.Context
	cancelBG context.CancelFunc
	wg       sync.WaitGroup
}

// shard is one __consumer_offsets partition this broker leads.
type shard struct {
	partition int32
	epoch     int32 // the leader epoch its leadership began in (Host.Leads)
	loading   bool
	groups    map[string]*Group
	offsets   map[string]map[TP]committed
	// inflight counts commits being written per group and partition
	// (OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT then).
	inflight map[string]map[TP]int
	joins    map[string]chan JoinResult
	syncs    map[string]chan SyncResult
	// abandon ends the loader when the shard goes.
	abandon chan struct{}
	// writes are the group records waiting for the shard's writer, in
	// the order of the changes they record; writing is set while the
	// writer runs (writes.go).
	writes  []queuedWrite
	writing bool
}

// committed is one committed offset and where its record is in the log:
// a commit is applied only over an older record, so two commits of one
// partition finishing out of order keep the later write.
type committed struct {
	OffsetValue
	logOffset int64
	// topicID is the id its topic had when it was committed, kept in
	// the commit's record too (its topic_id header), so a reload knows
	// it: a topic deleted and created again while the coordinator was
	// down or moving still takes the old offsets. "" when unknown (a
	// record written without the header, or a commit before this broker
	// had metadata): the sweep then stamps it with the id it first sees.
	// A topic deleted, or deleted and created again, takes its offsets
	// with it (dropOffsetsOfDeletedTopics).
	topicID string
	// applied numbers when it was put in place (Coordinator.applied).
	applied uint64
}

// New starts a coordinator.
func New(o Options) *Coordinator {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = 50 * time.Millisecond
	}
	c := &Coordinator{host: o.Host, log: logging.OrDiscard(o.Logger), now: o.Now, tick: o.Tick,
		shards: map[int32]*shard{}, stop: make(chan struct{})}
	// Kafka's first cleanup runs at startup, before any partition is
	// loaded: the first that can find a group is an interval later.
	c.cleanupDue = o.Now().Add(time.Duration(o.Host.Config().OffsetsRetentionCheckIntervalMs) * time.Millisecond)
	c.bg, c.cancelBG = context.WithCancel(context.Background())
	if o.Registry != nil {
		o.Registry.MustRegister(collector{c})
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.run() }()
	go func() { defer c.wg.Done(); c.refreshRemoteHWs() }()
	return c
}

// Close stops the coordinator; parked requests get NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.cancelBG()
		c.wg.Wait()
		c.mu.Lock()
		for p, s := range c.shards {
			c.unloadLocked(p, s)
		}
		c.mu.Unlock()
	})
}

func (c *Coordinator) run() {
	t := time.NewTicker(c.tick)
	defer t.Stop()
	ticks := 0
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.reconcile()
		c.expire()
		if ticks++; ticks%sweepEvery == 0 {
			c.dropOffsetsOfDeletedTopics()
		}
	}
}

// sweepEvery is how many ticks apart the offsets of deleted topics are
// looked for (a second at the default tick).
const sweepEvery = 20

// dropOffsetsOfDeletedTopics removes, with tombstones, the offsets of
// topics deleted since they were committed, as Kafka's coordinator does on
// a topic's deletion: a topic created again under the same name starts at
// auto.offset.reset, not at offsets of the records it no longer has. An
// offset's topic id is compared with the metadata's; one of a topic that
// did not exist when it was committed is left alone. The metadata is read
// with no lock of the coordinator's held, so it may be older than an
// offset applied meanwhile, whose commit read a newer id (the topic was
// created again in between): only offsets applied before the read are
// judged, the rest wait for the next sweep.
func (c *Coordinator) dropOffsetsOfDeletedTopics() {
	c.mu.Lock()
	before := c.applied
	topics := map[string]string{}
	for _, s := range c.shards {
		for _, offs := range s.offsets {
			for tp := range offs {
				topics[tp.Topic] = ""
			}
		}
	}
	c.mu.Unlock()
	if !c.readTopicIDs(topics) {
		return // no metadata yet: nothing can be told
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.shards {
		if !s.loading {
			c.dropStaleOffsetsLocked(s, s.offsets, topics, before, now)
		}
	}
}

// applyLocked numbers an offset as put in place now. c.mu held.
func (c *Coordinator) applyLocked(o committed) committed {
	c.applied++
	o.applied = c.applied
	return o
}

// readTopicIDs fills in the metadata's id of every topic in topics; false
// while this broker has no metadata yet. No lock of the coordinator's is
// held.
func (c *Coordinator) readTopicIDs(topics map[string]string) bool {
	for t := range topics {
		id, ok := c.host.TopicID(t)
		if !ok {
			return false
		}
		topics[t] = id
	}
	return true
}

// dropStaleOffsetsLocked drops from offsets, shard s's, with tombstones,
// those whose topic now has another id than the one they were committed
// under (none: deleted), and gives those with no id yet the one topics
// names. Topics missing from topics, offsets with a commit in flight and
// offsets applied after before (their ids may be newer than topics') are
// left for a later sweep. c.mu held.
func (c *Coordinator) dropStaleOffsetsLocked(s *shard, offsets map[string]map[TP]committed, topics map[string]string, before uint64, now time.Time) {
	for group, offs := range offsets {
		var b recordbatch.Builder
		var drops []groupTP
		for tp, o := range offs {
			id, seen := topics[tp.Topic]
			switch {
			case !seen || s.inflight[group][tp] > 0 || o.applied > before:
			case o.topicID == "":
				o.topicID = id
				offs[tp] = o
			case id != o.topicID:
				c.log.Info("dropping the offset of a deleted topic", "group", group, "topic", tp.Topic, "partition", tp.Partition,
					"offset", o.Offset, "topic_id", o.topicID, "now", id)
				b.Append(recordbatch.Record{Timestamp: now.UnixMilli(), Key: OffsetKey(group, tp.Topic, tp.Partition)})
				drops = append(drops, groupTP{group, tp})
				delete(offs, tp)
			}
		}
		if b.Count() > 0 {
			c.writeLocked(s, clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)), drops...)
		}
		if len(offs) == 0 {
			delete(offsets, group)
		}
	}
}

// reconcile loads the offsets partitions this broker has come to lead and
// unloads those it no longer leads (or leads again after losing the
// leadership: a new leadership reloads, since another coordinator may have
// written between). An epoch bump of the same leadership keeps the groups:
// reloading threw away every rebalance in progress when a follower died.
func (c *Coordinator) reconcile() {
	n := c.host.PartitionCount(OffsetsTopic)
	lead := map[int32]int32{}
	for p := int32(0); p < n; p++ {
		if epoch, ok := c.host.Leads(TP{OffsetsTopic, p}); ok {
			lead[p] = epoch
		}
	}
	var load []*shard
	c.mu.Lock()
	for p, s := range c.shards {
		if epoch, ok := lead[p]; !ok || epoch != s.epoch {
			c.unloadLocked(p, s)
		}
	}
	for p, epoch := range lead {
		if _, ok := c.shards[p]; !ok {
			s := &shard{partition: p, epoch: epoch, loading: true, groups: map[string]*Group{}, offsets: map[string]map[TP]committed{},
				inflight: map[string]map[TP]int{}, joins: map[string]chan JoinResult{}, syncs: map[string]chan SyncResult{}, abandon: make(chan struct{})}
			c.shards[p] = s
			load = append(load, s)
		}
	}
	c.mu.Unlock()
	for _, s := range load {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.load(s) }()
	}
}

func (c *Coordinator) unloadLocked(p int32, s *shard) {
	delete(c.shards, p)
	close(s.abandon)
	err := errNotCoordinatorOf(c, s)
	for _, g := range s.groups {
		c.deliverLocked(s, g.ID, g.Kill(c.now(), err))
	}
	for k, ch := range s.joins {
		ch <- JoinResult{Err: err}
		delete(s.joins, k)
	}
	for k, ch := range s.syncs {
		ch <- SyncResult{Err: err}
		delete(s.syncs, k)
	}
	if !s.loading {
		c.log.Info("unloaded groups", "partition", p, "groups", len(s.groups))
	}
}

// load replays the partition's groups and offsets from its log start to
// the log end the new leader has when loading begins. That end, not the
// high watermark, bounds it: a new leader's high watermark may still lag
// acknowledged commits (followers learn it a fetch late), and everything
// in the leader's log at its election is what its epoch commits (a leader
// never truncates; when it loses leadership the coordinator unloads, and
// the next leader replays its own log). Kafka's coordinator loads to the
// log end too. A commit whose record is not yet below the high watermark
// is visible to OffsetFetch, except with require_stable.
func (c *Coordinator) load(s *shard) {
	tp := TP{OffsetsTopic, s.partition}
	start := c.now()
	offs, ok := c.host.LocalOffsets(tp)
	if !ok {
		c.abandonLoad(s)
		return
	}
	target := offs.LogEnd
	groups := map[string]*Group{}
	offsets := map[string]map[TP]committed{}
	now := c.now()
	records, skipped := 0, 0
	for off := offs.LogStart; off < target; {
		buf, next, err := c.host.Read(tp, off, target)
		if err != nil {
			c.log.Error("loading groups failed; retrying on the next leadership check", "partition", s.partition, "err", err)
			c.abandonLoad(s)
			return
		}
		select {
		case <-s.abandon:
			return
		default:
		}
		if next <= off {
			break
		}
		for batch, err := range recordbatch.All(buf) {
			if err != nil {
				break
			}
			for rec, err := range batch.Records() {
				if err != nil || rec.Offset < off || rec.Offset >= target {
					continue
				}
				records++
				if err := applyRecord(groups, offsets, rec, now); err != nil {
					// A record this broker cannot read (a newer
					// Kafka's version) is skipped, not fatal: the
					// rest of the partition's groups still load.
					if skipped++; skipped <= maxSkipLogs {
						c.log.Warn("skipped a record of the offsets topic it cannot read", "partition", s.partition, "offset", rec.Offset, "err", err)
					}
				}
			}
		}
		off = next
	}
	// The loaded offsets' topics as the metadata has them now: an offset
	// whose topic was deleted (and perhaps created again) while no
	// coordinator held the partition goes before any member can fetch it,
	// not at the next sweep.
	topics := map[string]string{}
	for _, offs := range offsets {
		for tp := range offs {
			topics[tp.Topic] = ""
		}
	}
	known := c.readTopicIDs(topics)

	// Members could not heartbeat while the load ran: their sessions
	// start now (Kafka starts them when the group is loaded). A group
	// with more members than group.max.size allows (lowered since they
	// joined) rebalances at once, as Kafka's onGroupLoaded: the members
	// that rejoin last are refused (KIP-389). Left Stable, it kept them
	// all for as long as it stayed quiet.
	loaded := c.now()
	lim := c.limits()
	for _, g := range groups {
		g.StartSessions(loaded)
		if g.State == Stable && g.OverCapacity(lim) {
			c.log.Info("a loaded group has more members than group.max.size allows; rebalancing", "group", g.ID, "members", g.Size(), "group_max_size", lim.MaxSize)
			g.Rebalance(loaded)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[s.partition] != s {
		return
	}
	// Commits written while loading (none: writes wait for the load) and
	// groups created by requests answered LOAD_IN_PROGRESS do not exist.
	// Installed now: a sweep that read the metadata before this load did
	// leaves them alone.
	for _, offs := range offsets {
		for tp, o := range offs {
			offs[tp] = c.applyLocked(o)
		}
	}
	s.groups, s.offsets, s.loading = groups, offsets, false
	if known {
		c.dropStaleOffsetsLocked(s, offsets, topics, c.applied, loaded)
	}
	c.log.Info("loaded groups", "partition", s.partition, "leader_epoch", s.epoch, "groups", len(groups), "records", records,
		"skipped", skipped, "took", c.now().Sub(start).Round(time.Millisecond).String())
}

// abandonLoad drops a shard whose load failed; the next leadership check
// loads it again.
func (c *Coordinator) abandonLoad(s *shard) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[s.partition] == s {
		c.unloadLocked(s.partition, s)
	}
}

// maxSkipLogs bounds the warnings of one load about records it skips.
const maxSkipLogs = 10

// applyRecord replays one record of the log into the loaded state; an
// error names a record it could not read, and changed nothing.
func applyRecord(groups map[string]*Group, offsets map[string]map[TP]committed, rec recordbatch.Record, now time.Time) error {
	k, err := DecodeKey(rec.Key)
	if err != nil {
		return err
	}
	if k.IsOffset {
		tp := TP{k.Topic, k.Partition}
		if rec.Value == nil {
			delete(offsets[k.Group], tp)
			if len(offsets[k.Group]) == 0 {
				delete(offsets, k.Group)
			}
			return nil
		}
		v, err := DecodeOffset(rec.Value)
		if err != nil {
			return fmt.Errorf("offset of group %q, %s-%d: %w", k.Group, k.Topic, k.Partition, err)
		}
		if offsets[k.Group] == nil {
			offsets[k.Group] = map[TP]committed{}
		}
		offsets[k.Group][tp] = committed{OffsetValue: v, logOffset: rec.Offset, topicID: offsetTopicID(rec.Headers)}
		return nil
	}
	if rec.Value == nil {
		delete(groups, k.Group)
		return nil
	}
	v, err := DecodeGroup(rec.Value)
	if err != nil {
		return fmt.Errorf("metadata of group %q: %w", k.Group, err)
	}
	groups[k.Group] = Restore(k.Group, v, now)
	return nil
}

// expire runs every loaded group's clock: session timeouts, handed-out
// member ids, rebalance deadlines; and, every
// offsets.retention.check.interval.ms, the cleanup (cleanupLocked).
func (c *Coordinator) expire() {
	now := c.now()
	cfg := c.host.Config()
	retention := time.Duration(cfg.OffsetsRetentionMinutes) * time.Minute
	c.mu.Lock()
	cleanup := !now.Before(c.cleanupDue)
	if cleanup {
		c.cleanupDue = now.Add(time.Duration(cfg.OffsetsRetentionCheckIntervalMs) * time.Millisecond)
	}
	for _, s := range c.shards {
		if s.loading {
			continue
		}
		for id, g := range s.groups {
			eff := g.Tick(now)
			c.deliverLocked(s, id, eff)
			if eff.Persist {
				c.writeLocked(s, groupBatch(g, now))
			}
		}
		if cleanup {
			c.cleanupLocked(s, now, retention)
		}
	}
	c.mu.Unlock()
}

// cleanupLocked is Kafka's cleanupGroupMetadata, run every
// offsets.retention.check.interval.ms (10 minutes), not at every tick:
// expired offsets go with tombstones, and a group that is Empty and has
// no offsets left goes with a tombstone for its metadata record, in the
// same batch. Until then an Empty group without offsets is listed and
// described, as in Kafka, and one that gets members again meanwhile
// stays; a coordinator move loads it from its record, which has no
// tombstone, and the next coordinator's cleanup decides.
//
// Offsets expire by Kafka's rules (offsetExpiry): a group that had
// members counts from when it became Empty, not from a later commit; one
// only ever committed to from outside counts from each commit; a Stable
// consumer group keeps what its members subscribe to and loses the rest
// retention after their commit; a group rebalancing, or of another
// protocol type with members, keeps everything. An offset
// offsets.retention.minutes old to the millisecond has expired, as in
// Kafka.
func (c *Coordinator) cleanupLocked(s *shard, now time.Time, retention time.Duration) {
	ids := make(map[string]bool, len(s.groups)+len(s.offsets))
	for id := range s.groups {
		ids[id] = true
	}
	for id := range s.offsets {
		ids[id] = true
	}
	for id := range ids {
		g, hasGroup := s.groups[id]
		var b recordbatch.Builder
		var drops []groupTP
		if offs := s.offsets[id]; len(offs) > 0 {
			rule := offsetExpiry{applies: true} // no group loaded: only committed to from outside
			if hasGroup {
				rule = g.offsetExpiry()
			}
			if rule.applies {
				for tp, o := range offs {
					if s.inflight[id][tp] == 0 && rule.expired(tp, o.OffsetValue, now, retention) {
						b.Append(recordbatch.Record{Timestamp: now.UnixMilli(), Key: OffsetKey(id, tp.Topic, tp.Partition)})
						drops = append(drops, groupTP{id, tp})
						delete(offs, tp)
					}
				}
			}
			if len(offs) == 0 {
				delete(s.offsets, id)
			}
		}
		// Kafka's "Empty and no offsets": the group goes, its tombstone
		// after those of its last offsets (a move between two writes
		// would load it again). Offsets without a group record get one
		// too, as Kafka's cache holds a group for them.
		forget := len(s.offsets[id]) == 0 && len(s.inflight[id]) == 0 &&
			(hasGroup && g.State == Empty && g.Size() == 0 && !g.HasPending() || !hasGroup && len(drops) > 0)
		if forget {
			delete(s.groups, id)
			b.Append(recordbatch.Record{Timestamp: now.UnixMilli(), Key: GroupKey(id)})
		}
		if b.Count() > 0 {
			c.writeLocked(s, clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)), drops...)
		}
	}
}

func errNotCoordinatorOf(c *Coordinator, s *shard) *kerr.Error {
	return kerr.New(kerr.NotCoordinator, "broker %d no longer coordinates the groups of %s-%d", c.host.BrokerID(), OffsetsTopic, s.partition)
}

// deliverLocked hands the answers of a step to the parked requests.
func (c *Coordinator) deliverLocked(s *shard, group string, eff Effects) {
	for id, r := range eff.Joins {
		if ch, ok := s.joins[waitKey(group, id)]; ok {
			ch <- r
			delete(s.joins, waitKey(group, id))
		}
	}
	for id, r := range eff.Syncs {
		if ch, ok := s.syncs[waitKey(group, id)]; ok {
			ch <- r
			delete(s.syncs, waitKey(group, id))
		}
	}
}

func waitKey(group, member string) string { return group + "\x00" + member }

// groupBatch is the batch persisting g: its metadata, or a tombstone once
// it is dead.
func groupBatch(g *Group, now time.Time) []byte {
	var b recordbatch.Builder
	rec := recordbatch.Record{Timestamp: now.UnixMilli(), Key: GroupKey(g.ID)}
	if g.State != Dead {
		rec.Value = EncodeGroup(g.Value())
	}
	b.Append(rec)
	return clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// newMemberID is Kafka's clientId-uuid.
func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if clientID == "" {
		clientID = "member"
	}
	return clientID + "-" + hex.EncodeToString(b[:])
}

// shardFor finds the loaded shard coordinating group, or the error to
// answer: NOT_COORDINATOR (with the coordinator the metadata names) or
// COORDINATOR_LOAD_IN_PROGRESS. Called without mu; returns with mu held
// on success.
func (c *Coordinator) lockShard(group string) (*shard, error) {
	if group == "" {
		return nil, kerr.BadField(kerr.InvalidGroupID, "group_id", "must not be empty")
	}
	if len(group) > maxStoredString {
		return nil, kerr.BadField(kerr.InvalidGroupID, "group_id", "%d bytes; at most %d", len(group), maxStoredString)
	}
	n := c.host.PartitionCount(OffsetsTopic)
	if n == 0 {
		return nil, kerr.New(kerr.CoordinatorNotAvailable, "%s does not exist yet: call FindCoordinator first", OffsetsTopic)
	}
	p := PartitionFor(group, n)
	hint, hasHint := c.host.PartitionLeader(TP{OffsetsTopic, p})
	// Leadership is asked here too, not only at the leadership check: in
	// between, a shard of a leadership that ended would answer from
	// state another coordinator may have moved past.
	since, leads := c.host.Leads(TP{OffsetsTopic, p})
	c.mu.Lock()
	s, ok := c.shards[p]
	if ok = ok && leads; !ok {
		c.mu.Unlock()
		e := kerr.New(kerr.NotCoordinator, "broker %d is not the coordinator of group %q (%s-%d)", c.host.BrokerID(), group, OffsetsTopic, p)
		if hasHint && hint.ID != c.host.BrokerID() {
			e.Coordinator = &kerr.NodeHint{ID: hint.ID, Address: hint.Address}
		}
		return nil, e
	}
	// A shard of an earlier leadership than the one Leads reports: the
	// next leadership check loads the new one.
	if s.loading || s.epoch != since {
		c.mu.Unlock()
		return nil, kerr.New(kerr.CoordinatorLoadInProgress, "broker %d is loading the groups of %s-%d", c.host.BrokerID(), OffsetsTopic, p)
	}
	return s, nil
}

// limits reads the group settings in force.
func (c *Coordinator) limits() Limits {
	cfg := c.host.Config()
	return Limits{
		MinSessionTimeout:     time.Duration(cfg.GroupMinSessionTimeoutMs) * time.Millisecond,
		MaxSessionTimeout:     time.Duration(cfg.GroupMaxSessionTimeoutMs) * time.Millisecond,
		InitialRebalanceDelay: time.Duration(cfg.GroupInitialRebalanceDelayMs) * time.Millisecond,
		MaxSize:               int(min(cfg.GroupMaxSize, math.MaxInt32)),
	}
}

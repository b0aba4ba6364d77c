package ctrl

import (
	"fmt"
	"slices"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// cause says why the controller changes a partition's state; it labels the
// election metric and picks the event kind.
type cause string

const (
	causeNew          cause = "new_partition"
	causeOffline      cause = "offline"
	causePreferred    cause = "preferred"
	causeUnclean      cause = "unclean"
	causeShutdown     cause = "controlled_shutdown"
	causeAlter        cause = "alter_partition"
	causeConfigChange cause = "config_change"
)

// change is one decision to write.
type change struct {
	p     *partition
	d     election.Decision
	cause cause
}

// commit writes changes with compare-and-set in fenced transactions
// (effWriteStates) and, when the result comes back (writeDone), applies
// what was written to the model and calls then with the partitions written.
// A partition whose state changed under the controller (a conflict) gets its
// current state and is not written; its next event decides again. A write
// error ends the term (fail) and is passed to then, which must stop without
// pushing (write, then push). Without changes then runs at once.
func (c *core) commit(changes []change, then func([]*partition, error)) {
	if len(changes) == 0 {
		then(nil, nil)
		return
	}
	updates := make([]metastore.PartitionUpdate, len(changes))
	byKey := make(map[election.TopicPartition]change, len(changes))
	for i, ch := range changes {
		updates[i] = metastore.PartitionUpdate{Current: ch.p.rec, Next: metastore.PartitionState{
			Leader: ch.d.State.Leader, LeaderEpoch: ch.d.State.LeaderEpoch, ISR: ch.d.State.ISR, EmptyLogLeader: ch.d.EmptyLog}}
		byKey[ch.p.tp()] = ch
	}
	what := fmt.Sprintf("partition states (%d)", len(updates))
	c.await(effWriteStates{what: what, updates: updates}, what, func(ev event) {
		c.writeDone(ev.(evWriteResult), what, byKey, then)
	})
}

// writeDone takes the outcome of commit's write.
func (c *core) writeDone(r evWriteResult, what string, byKey map[election.TopicPartition]change, then func([]*partition, error)) {
	var written []*partition
	for _, rec := range r.res.Updated {
		ch := byKey[election.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}]
		old := ch.p.rec.State
		ch.p.rec = rec
		written = append(written, ch.p)
		c.record(ch, old)
	}
	c.stateDirty = c.stateDirty || len(written) > 0
	if r.err != nil {
		c.fail(what, r.err, r.resigning)
		then(written, r.err)
		return
	}
	for _, p := range written {
		// A reassigning partition's state changed by an election or a
		// shrink the controller made may have put its whole target in the
		// ISR, or moved its leader into the target: phase B is looked at
		// again (Kafka's controller watches the state of a partition it
		// reassigns). An AlterPartition looks itself, holding its answer.
		if p.reassigning() && byKey[p.tp()].cause != causeAlter {
			c.armReassignCheck(0)
			break
		}
	}
	for _, cf := range r.res.Conflicts {
		ch := byKey[election.TopicPartition{Topic: cf.Topic, Partition: cf.Partition}]
		c.log.Warn("partition state changed under the controller; refreshed", "partition", ch.p.tp().String(),
			"expected_revision", cf.Expected, "err", cf.Err())
		if cf.Current != nil {
			ch.p.rec = *cf.Current
		}
	}
	then(written, nil)
}

// uncleanLoss names, for an unclean election, how far the new leader's log
// is behind the high watermark the last leader reported: the committed
// offsets it does not have, as far as this controller was told. Both
// figures are the brokers' last reports, so the count is an estimate
// (the new leader may have fetched a little more since).
func (c *core) uncleanLoss(p *partition, s metastore.PartitionState) []any {
	last, ok := c.leaderEnd[p.tp()]
	if !ok {
		return []any{"committed_offsets_lost", "unknown: no leader reported its high watermark to this controller"}
	}
	attrs := []any{"last_leader_high_watermark", last.hw, "last_leader_reporting", last.broker, "last_leader_epoch_reported", last.epoch}
	mine, ok := c.progress[progressKey{tp: p.tp(), broker: s.Leader}]
	if !ok {
		return append(attrs, "committed_offsets_lost", "unknown: the new leader has not reported its log end offset")
	}
	return append(attrs, "new_leader_log_end_offset", mine.GetLogEndOffset(),
		"committed_offsets_lost", max(0, last.hw-mine.GetLogEndOffset()))
}

// leftISR reports whether a member of from is not in to.
func leftISR(from, to []int32) bool {
	for _, id := range from {
		if !slices.Contains(to, id) {
			return true
		}
	}
	return false
}

// record logs a written change in Kafka's terms and emits it as an
// effDecision (counted, traced, added to the event ring) unless it is a
// new partition's first state or a leader's own ISR change.
func (c *core) record(ch change, old metastore.PartitionState) {
	p, s := ch.p, ch.p.rec.State
	attrs := []any{"partition", p.tp().String(), "leader", s.Leader, "leader_epoch", s.LeaderEpoch,
		"isr", s.ISR, "partition_epoch", s.PartitionEpoch, "previous_leader", old.Leader,
		"previous_isr", old.ISR, "reason", ch.d.Reason}
	leaderChanged := s.Leader != old.Leader
	dec := effDecision{c: ch, old: old, now: s, kind: controlv1.EventKind_EVENT_KIND_LEADER_ELECTION,
		elected: leaderChanged && s.Leader != election.NoLeader}
	switch {
	case ch.cause == causeNew:
		c.log.Info("Initialized partition state", attrs...)
		return
	case ch.d.EmptyLog:
		// Every record of the partition is lost: name how many were known.
		c.log.Error("Unclean leader election from an empty log: the elected replica lost its log with a replaced log dir "+
			"and starts the partition again at offset 0; every record written before is lost",
			append(attrs, "records_lost", c.knownRecords(p, old))...)
		dec.unclean, dec.label = true, causeUnclean
		dec.kind = controlv1.EventKind_EVENT_KIND_UNCLEAN_LEADER_ELECTION
	case ch.d.Unclean:
		// F20: acknowledged records that only the old ISR had are lost.
		c.log.Error("Unclean leader election: an out-of-sync replica was elected leader; "+
			"records acknowledged by the previous ISR may be lost", append(attrs, c.uncleanLoss(p, s)...)...)
		dec.unclean, dec.label = true, causeUnclean
		dec.kind = controlv1.EventKind_EVENT_KIND_UNCLEAN_LEADER_ELECTION
	case leaderChanged && s.Leader == election.NoLeader:
		// F19/F20: no live ISR member and no unclean election allowed.
		c.log.Warn("Partition offline: no live ISR member can lead; waiting for one to return", attrs...)
	case leaderChanged:
		c.log.Info("Elected leader", append(attrs, "cause", string(ch.cause))...)
		dec.label = ch.cause
		if ch.cause == causePreferred {
			dec.kind = controlv1.EventKind_EVENT_KIND_PREFERRED_LEADER_ELECTION
		}
	case ch.cause == causeAlter:
		c.log.Info("Committed ISR change", attrs...)
		return
	default:
		c.log.Info("Removed replicas from ISR", append(attrs, "cause", string(ch.cause))...)
		dec.kind = controlv1.EventKind_EVENT_KIND_ISR_SHRINK
	}
	// New partitions and a leader's own changes returned above; an
	// unclean election replaces the ISR and counts as one.
	if !dec.unclean && leftISR(old.ISR, s.ISR) {
		dec.shrunk = ch.cause
	}
	ev := &controlv1.ClusterEvent{Kind: dec.kind, NodeId: c.self.Id, Topic: p.t.name, Partition: p.id,
		LeaderEpoch: s.LeaderEpoch, Isr: append([]int32(nil), s.ISR...), Reason: ch.d.Reason}
	if dec.kind != controlv1.EventKind_EVENT_KIND_ISR_SHRINK {
		ev.NodeId = s.Leader // the broker the election is about
	}
	dec.ev = ev
	c.emit(dec)
}

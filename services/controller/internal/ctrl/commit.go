package ctrl

import (
	"fmt"
	"time"

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

// commit writes changes with compare-and-set in fenced transactions and
// applies what was written to the model. It returns the partitions written.
// A partition whose state changed under the controller (a conflict) gets its
// current state and is not written; its next event decides again. A write
// error ends the term (fail) and is returned: the caller must stop without
// pushing (write, then push).
func (a *Active) commit(changes []change) ([]*partition, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	start := time.Now()
	updates := make([]metastore.PartitionUpdate, len(changes))
	byKey := make(map[election.TopicPartition]change, len(changes))
	for i, c := range changes {
		updates[i] = metastore.PartitionUpdate{Current: c.p.rec, Next: metastore.PartitionState{
			Leader: c.d.State.Leader, LeaderEpoch: c.d.State.LeaderEpoch, ISR: c.d.State.ISR}}
		byKey[c.p.tp()] = c
	}
	ctx, cancel := a.writeCtx()
	res, err := a.sess.UpdatePartitionStates(ctx, updates)
	cancel()
	var written []*partition
	elections := 0
	for _, rec := range res.Updated {
		c := byKey[election.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}]
		old := c.p.rec.State
		c.p.rec = rec
		written = append(written, c.p)
		if a.record(c, old) {
			elections++
		}
	}
	a.stateDirty = a.stateDirty || len(written) > 0
	if elections > 0 {
		a.d.Metrics.electionSeconds.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		a.fail(fmt.Sprintf("partition states (%d)", len(updates)), err)
		return written, err
	}
	for _, cf := range res.Conflicts {
		c := byKey[election.TopicPartition{Topic: cf.Topic, Partition: cf.Partition}]
		a.log.Warn("partition state changed under the controller; refreshed", "partition", c.p.tp().String(),
			"expected_revision", cf.Expected, "err", cf.Err())
		if cf.Current != nil {
			c.p.rec = *cf.Current
		}
	}
	return written, nil
}

// record logs a written change in Kafka's terms, counts elections and adds
// the event. It reports whether the leader changed.
func (a *Active) record(c change, old metastore.PartitionState) bool {
	p, s := c.p, c.p.rec.State
	attrs := []any{"partition", p.tp().String(), "leader", s.Leader, "leader_epoch", s.LeaderEpoch,
		"isr", s.ISR, "partition_epoch", s.PartitionEpoch, "previous_leader", old.Leader,
		"previous_isr", old.ISR, "reason", c.d.Reason}
	leaderChanged := s.Leader != old.Leader
	kind := controlv1.EventKind_EVENT_KIND_LEADER_ELECTION
	switch {
	case c.cause == causeNew:
		a.log.Info("Initialized partition state", attrs...)
		return false
	case c.d.Unclean:
		// F20: acknowledged records that only the old ISR had are lost.
		a.log.Error("Unclean leader election: an out-of-sync replica was elected leader; "+
			"records acknowledged by the previous ISR may be lost", attrs...)
		a.d.Metrics.unclean.Inc()
		a.d.Metrics.elections.WithLabelValues(string(causeUnclean)).Inc()
		kind = controlv1.EventKind_EVENT_KIND_UNCLEAN_LEADER_ELECTION
	case leaderChanged && s.Leader == election.NoLeader:
		// F19/F20: no live ISR member and no unclean election allowed.
		a.log.Warn("Partition offline: no live ISR member can lead; waiting for one to return", attrs...)
	case leaderChanged:
		a.log.Info("Elected leader", append(attrs, "cause", string(c.cause))...)
		a.d.Metrics.elections.WithLabelValues(string(c.cause)).Inc()
		if c.cause == causePreferred {
			kind = controlv1.EventKind_EVENT_KIND_PREFERRED_LEADER_ELECTION
		}
	case c.cause == causeAlter:
		a.log.Info("Committed ISR change", attrs...)
		return false
	default:
		a.log.Info("Removed replicas from ISR", append(attrs, "cause", string(c.cause))...)
		kind = controlv1.EventKind_EVENT_KIND_ISR_SHRINK
	}
	a.traceDecision(kind, c, old)
	a.event(kind, func(ev *controlv1.ClusterEvent) {
		ev.Topic, ev.Partition = p.t.name, p.id
		ev.LeaderEpoch, ev.Isr = s.LeaderEpoch, append([]int32(nil), s.ISR...)
		ev.Reason = c.d.Reason
		if kind != controlv1.EventKind_EVENT_KIND_ISR_SHRINK {
			ev.NodeId = s.Leader // the broker the election is about
		}
	})
	return leaderChanged && s.Leader != election.NoLeader
}

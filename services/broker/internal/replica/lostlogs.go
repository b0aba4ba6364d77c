package replica

import (
	"slices"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// A broker that lost logs (a log dir came back empty: a replaced disk, or
// a dir left out of log.dirs) cannot tell a partition whose log was there
// from one it never had. Creating the log empty is safe for a follower
// outside the ISR: it catches up before it rejoins. As leader, or as an
// ISR member that may be elected, an empty log would lose every write the
// ISR acknowledged (the last ISR member restarting on a new disk). So such
// a partition is refused with KAFKA_STORAGE_ERROR and reported offline:
// the controller moves leadership to another ISR member and drops this
// broker from the ISR (or leaves the partition offline when no other
// member is alive: an unclean election, or the old disk back, is then the
// operator's call), and its push of the follower role lets the log be
// created. The state lasts until a full push of the broker's roles found a
// log for every partition it must lead or be in the ISR of, and no refused
// one is left. A partition a full push did not name is newer than that push
// (a topic created since, or a replica added since, which joins the ISR
// only through its leader): it has no lost log, and is created as asked.
//
// The way out for a partition no other replica can lead (its every copy
// was on lost dirs, RF 1 say) is an unclean election the operator asks for
// (ElectLeaders UNCLEAN, or unclean.leader.election.enable on the topic):
// the controller then names this broker leader with empty_log_leader set,
// and only then is the log created empty to lead. It starts at offset 0,
// as Kafka's would: the lost log's end offset is known nowhere for sure,
// and the new leader epoch starts the epoch cache at 0. Committed consumer
// offsets past the new end get OFFSET_OUT_OF_RANGE and reset by
// auto.offset.reset, as after any unclean election that shortened a log.
type lostLogs struct {
	active bool
	// refused are the partitions refused so far and still not created.
	refused map[TP]bool
	// sawFull is set once a full push of this incarnation's roles applied.
	sawFull bool
	// named are the partitions full pushes and full metadata views named
	// as this broker's; nil before the first.
	named map[TP]bool
}

// noteFullPush records the partitions a full push names, before it is
// applied: only they may have had a log on a lost dir.
func (m *Manager) noteFullPush(states []*commonv1.PartitionState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.lost.active {
		return
	}
	if m.lost.named == nil {
		m.lost.named = map[TP]bool{}
	}
	for _, ps := range states {
		m.lost.named[TP{Topic: ps.GetTopic(), Partition: ps.GetPartition()}] = true
	}
}

// noteFullView records, from a full metadata view (every partition of the
// cluster), the partitions this broker hosts. When it hosts none the
// controller sends it no roles at all, so no full push will come: the view
// stands for one, and whatever is created on the broker later is new.
func (m *Manager) noteFullView(states []*commonv1.PartitionState) {
	var hosted []*commonv1.PartitionState
	for _, ps := range states {
		if slices.Contains(ps.GetReplicas(), m.opts.BrokerID) {
			hosted = append(hosted, ps)
		}
	}
	m.noteFullPush(hosted)
	m.settleLostLogs(len(hosted) == 0)
}

// refuseEmptyLog reports why tp, which has no log here, must not get an
// empty one in the roles ps gives this broker; nil when it may.
func (m *Manager) refuseEmptyLog(tp TP, ps *commonv1.PartitionState) error {
	m.mu.RLock()
	active := m.lost.active
	newer := m.lost.named != nil && !m.lost.named[tp]
	m.mu.RUnlock()
	if !active || newer {
		return nil
	}
	if _, ok := m.Replica(tp); ok || m.logs.Has(tp) {
		return nil
	}
	self := m.opts.BrokerID
	if ps.GetLeader() != self && !slices.Contains(ps.GetIsr(), self) {
		return nil
	}
	if ps.GetLeader() == self && ps.GetEmptyLogLeader() {
		m.log.Warn("Leading from an empty log after an unclean election: this broker lost the partition's log with a replaced log dir, "+
			"and every record of the partition written before this leader epoch is lost; it starts again at offset 0",
			"topic", tp.Topic, "partition", tp.Partition, "leader_epoch", ps.GetLeaderEpoch(), "isr", ps.GetIsr())
		return nil
	}
	m.mu.Lock()
	if m.lost.refused == nil {
		m.lost.refused = map[TP]bool{}
	}
	first := !m.lost.refused[tp]
	m.lost.refused[tp] = true
	m.mu.Unlock()
	if first {
		m.log.Warn("Refusing to lead or stay in the ISR with an empty log: this broker lost a log dir that may have held it",
			"topic", tp.Topic, "partition", tp.Partition, "leader", ps.GetLeader(), "isr", ps.GetIsr(), "leader_epoch", ps.GetLeaderEpoch())
	}
	return kerr.New(kerr.KafkaStorageError, "broker %d has no log for %s-%d and lost a log dir that may have held it: "+
		"it will not lead or be in the ISR with an empty log (leader %d, ISR %v)", self, tp.Topic, tp.Partition, ps.GetLeader(), ps.GetIsr())
}

// forgetDeleted notes that tp's log was deleted (its topic was): a topic
// of the same name created later is a new one.
func (m *Manager) forgetDeleted(tp TP) {
	m.mu.Lock()
	delete(m.lost.named, tp)
	m.mu.Unlock()
	m.forgetRefusal(tp, "it is no longer this broker's")
}

// forgetRefusal notes that tp, refused before, now has its log here, or
// is no longer this broker's (why says which, for the log).
func (m *Manager) forgetRefusal(tp TP, why string) {
	m.mu.RLock()
	was := m.lost.refused[tp]
	m.mu.RUnlock()
	if !was {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.offline, tp)
	delete(m.lost.refused, tp)
	m.log.Info("A partition refused for want of its log: "+why, "topic", tp.Topic, "partition", tp.Partition)
}

// settleLostLogs ends the state once a full push applied and nothing
// refused is left.
func (m *Manager) settleLostLogs(full bool) {
	m.mu.Lock()
	if !m.lost.active {
		m.mu.Unlock()
		return
	}
	if full {
		m.lost.sawFull = true
	}
	done := m.lost.sawFull && len(m.lost.refused) == 0
	if done {
		m.lost.active = false
	}
	m.mu.Unlock()
	if done {
		m.log.Info("Every partition this broker leads or is in the ISR of has its log: partitions without one are created empty again")
		if f := m.opts.LostLogsSettled; f != nil {
			go f()
		}
	}
}

// LostLogRefusals lists the partitions refused for want of a lost log.
func (m *Manager) LostLogRefusals() []TP {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]TP, 0, len(m.lost.refused))
	for tp := range m.lost.refused {
		out = append(out, tp)
	}
	return out
}

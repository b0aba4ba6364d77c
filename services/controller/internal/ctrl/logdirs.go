package ctrl

import (
	"fmt"
	"maps"
	"slices"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// A broker's replica on an offline log dir is, for its partition, as good
// as a dead broker (Kafka's offline replica): it cannot lead and it leaves
// the ISR. The broker reports its offline dirs in every session message;
// they last until that incarnation departs (a restart re-reads its disks).

// noteOfflineDirs records broker id's offline log dirs and handles the
// partitions newly on one: a new leader where id led, id out of the ISR.
// then runs once that is written and pushed.
func (c *core) noteOfflineDirs(id int32, dirs []*controlv1.OfflineLogDir, then func()) {
	before := c.offlineOf(id)
	if len(dirs) == 0 && len(before) == 0 {
		then()
		return
	}
	c.offlineDirs[id] = dirs
	if len(dirs) == 0 {
		delete(c.offlineDirs, id)
	}
	view := c.view()
	var changes []change
	for tp := range c.offlineOf(id) {
		if before[tp] {
			continue
		}
		c.log.Warn("Replica on an offline log dir", "broker_id", id, "partition", tp.String())
		p := c.lookup(tp.Topic, tp.Partition)
		if p == nil || !p.hasState() {
			continue
		}
		if s := p.state(); s.Leader != id && !s.InISR(id) {
			continue
		}
		if d := election.OnBrokerFailure(p.view(), c.viewFor(p, view), c.allowUnclean(p.t)); d.Changed {
			changes = append(changes, change{p: p, d: d, cause: causeOffline})
		}
	}
	c.commit(changes, func(written []*partition, err error) {
		if err == nil {
			c.pushChanges(written)
			c.viewDirty = true
		}
		then()
	})
}

// offlineOf is the set of broker id's replicas on offline log dirs.
func (c *core) offlineOf(id int32) map[election.TopicPartition]bool {
	out := map[election.TopicPartition]bool{}
	for _, d := range c.offlineDirs[id] {
		for _, tp := range d.GetPartitions() {
			out[election.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()}] = true
		}
	}
	return out
}

// replicaOffline reports whether broker id's replica of p is on an offline
// log dir.
func (c *core) replicaOffline(p *partition, id int32) bool {
	for _, d := range c.offlineDirs[id] {
		for _, tp := range d.GetPartitions() {
			if tp.GetTopic() == p.t.name && tp.GetPartition() == p.id {
				return true
			}
		}
	}
	return false
}

// viewFor is the brokers view for decisions about p: a broker whose
// replica of p is on an offline log dir counts as not registered; one whose
// replica lost its log (a replaced dir) is listed in LostLog, for an
// unclean election to choose last.
func (c *core) viewFor(p *partition, view election.Brokers) election.Brokers {
	var gone []int32
	for id := range c.offlineDirs {
		if c.replicaOffline(p, id) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return view
	}
	v := view
	v.Epochs = maps.Clone(view.Epochs)
	for _, id := range gone {
		if _, ok := view.Epochs[id]; ok && !view.ShuttingDown[id] && c.replicaLostLog(p, id) {
			if v.LostLog == nil {
				v.LostLog = map[int32]bool{}
			}
			v.LostLog[id] = true
		}
		delete(v.Epochs, id)
	}
	if view.ShuttingDown != nil {
		v.ShuttingDown = maps.Clone(view.ShuttingDown)
		for _, id := range gone {
			delete(v.ShuttingDown, id)
		}
	}
	return v
}

// replicaLostLog reports whether broker id reports its replica of p as
// having lost its log (OfflineLogDir.lost_logs), not as unreachable.
func (c *core) replicaLostLog(p *partition, id int32) bool {
	for _, d := range c.offlineDirs[id] {
		if !d.GetLostLogs() {
			continue
		}
		for _, tp := range d.GetPartitions() {
			if tp.GetTopic() == p.t.name && tp.GetPartition() == p.id {
				return true
			}
		}
	}
	return false
}

// leaderHasLog reports whether p's leader has reported leading it in its
// current epoch: it has made its log, so a push must not tell it again to
// lead from an empty one. The stored EmptyLogLeader stays until the state's
// next write (an RF 1 partition may have none for a long time); a leader
// that lost its disk a second time meanwhile would otherwise start empty
// once more, unasked.
func (c *core) leaderHasLog(p *partition) bool {
	s := p.rec.State
	e, ok := c.leaderEnd[p.tp()]
	return ok && e.broker == s.Leader && e.epoch >= s.LeaderEpoch
}

// reportedEnd is a leader's last reported log end offset and high
// watermark.
type reportedEnd struct {
	leo    int64
	hw     int64
	broker int32
	epoch  int32
}

// knownRecords says, for the log of an unclean election from an empty
// log, which records are lost: those below the log end offset p's leader
// last reported to this controller, when it did.
func (c *core) knownRecords(p *partition, old metastore.PartitionState) string {
	e, ok := c.leaderEnd[p.tp()]
	if !ok {
		return fmt.Sprintf("every record up to leader epoch %d; no leader reported its log end offset to this controller", old.LeaderEpoch)
	}
	if e.leo == 0 {
		return fmt.Sprintf("none known: broker %d last reported an empty log (leader epoch %d)", e.broker, e.epoch)
	}
	return fmt.Sprintf("offsets 0 to %d at least (log end offset %d last reported by leader %d in leader epoch %d)", e.leo-1, e.leo, e.broker, e.epoch)
}

// offlineDirsOf lists broker id's offline log dirs, sorted by path.
func (c *core) offlineDirsOf(id int32) []*controlv1.OfflineLogDir {
	out := slices.Clone(c.offlineDirs[id])
	slices.SortFunc(out, func(x, y *controlv1.OfflineLogDir) int {
		if x.GetPath() < y.GetPath() {
			return -1
		}
		if x.GetPath() > y.GetPath() {
			return 1
		}
		return 0
	})
	return out
}

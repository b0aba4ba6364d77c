package ctrl

import (
	"maps"
	"slices"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
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
// replica of p is on an offline log dir counts as not registered.
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

package ctrl

import (
	"fmt"
	"slices"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
)

// Repair after etcd went backwards (restored from an older snapshot; DESIGN.md,
// "etcd going backwards"). A broker refuses a partition state older than
// the one it holds and answers with the held one; the controller takes that
// state back into etcd and carries on from it, so its elections and the
// leaders' AlterPartitions build on what the brokers act on again.

// evNewerStateHeld is a LeaderAndIsr answer of broker incarnation
// (broker, epoch) refusing partition states as older than its own, with the
// states it holds.
type evNewerStateHeld struct {
	broker int32
	epoch  int64
	held   []*controlv1.PartitionResult
}

func (evNewerStateHeld) coreEvent() {}

// newerStateHeld adopts the states a broker holds for the partitions it
// leads in them. Only a leader's own state is taken: the leader alone hears
// the answers to its AlterPartitions, so a follower's ISR may still list
// replicas the leader has since dropped and acknowledged records without.
// The leader's committed ISR holds every acknowledged record (its HW waits
// for the committed ISR and any pending additions). A state with a
// partition epoch newer than etcd's is written under its own epochs (it is
// the decision a controller wrote before the restore, so no two decisions
// share a (leader epoch, partition epoch)). One whose partition epoch this
// controller already wrote past since the restore, under other epochs, is
// written as a new decision instead: same leader and ISR, leader epoch and
// partition epoch above both.
func (c *core) newerStateHeld(from int32, epoch int64, held []*controlv1.PartitionResult) {
	if b := c.brokers[from]; b == nil || b.info.Epoch != epoch {
		return // a departed incarnation: its successor answers for itself
	}
	var changes []change
	seen := map[*partition]bool{}
	for _, r := range held {
		if !r.GetHeldNewer() {
			continue
		}
		p := c.partitionOf(r.GetTopic(), r.GetPartition())
		if p == nil || seen[p] || !p.hasState() {
			continue
		}
		if d, ok := c.adoption(p, from, r); ok {
			seen[p] = true
			changes = append(changes, d)
		}
	}
	if len(changes) == 0 {
		return
	}
	c.commit(changes, func(written []*partition, err error) {
		if err != nil || c.stopping() {
			return
		}
		// The leader holds the state already and ignores it; followers
		// holding older ones take it, and every broker's metadata cache
		// names the leader the brokers act on again.
		c.pushChanges(written)
	})
}

// partitionOf is a live topic's partition, or nil.
func (c *core) partitionOf(name string, id int32) *partition {
	t := c.topics[name]
	if t == nil || t.deleting || id < 0 || int(id) >= len(t.parts) {
		return nil
	}
	return t.parts[id]
}

// adoption is the change that takes the state r reports into etcd, if
// there is one to take.
func (c *core) adoption(p *partition, from int32, r *controlv1.PartitionResult) (change, bool) {
	cur := p.rec.State
	held := election.PartitionState{Leader: r.GetHeldLeader(), LeaderEpoch: r.GetHeldLeaderEpoch(),
		PartitionEpoch: r.GetHeldPartitionEpoch(), ISR: slices.Clone(r.GetHeldIsr())}
	attrs := []any{"partition", p.tp().String(), "broker", from, "held_leader", held.Leader,
		"held_leader_epoch", held.LeaderEpoch, "held_partition_epoch", held.PartitionEpoch, "held_isr", held.ISR,
		"leader", cur.Leader, "leader_epoch", cur.LeaderEpoch, "partition_epoch", cur.PartitionEpoch, "isr", cur.ISR}
	switch {
	case held.Leader != from:
		// A follower's view: see newerStateHeld. Its leader answers for
		// the partition.
		c.log.Warn("Not adopting a follower's partition state: only its leader's is taken", attrs...)
		return change{}, false
	case !slices.Contains(p.replicas, held.Leader) || !slices.Contains(held.ISR, held.Leader) ||
		slices.ContainsFunc(held.ISR, func(id int32) bool { return !slices.Contains(p.replicas, id) }):
		c.log.Error("Not adopting a partition state a broker holds: it names replicas outside the assignment", attrs...)
		return change{}, false
	case held.PartitionEpoch > cur.PartitionEpoch:
		c.log.Error("Adopting the partition state the leader holds: etcd's was older (restored from an older snapshot?)", attrs...)
		return change{p: p, d: election.Decision{State: held, Changed: true,
			Reason: fmt.Sprintf("adopted from leader %d: etcd went backwards", from)}, cause: causeAdopt, adopt: true}, true
	case held.LeaderEpoch == cur.LeaderEpoch && held.PartitionEpoch == cur.PartitionEpoch &&
		held.Leader == cur.Leader && slices.Equal(held.ISR, cur.ISR):
		return change{}, false // etcd holds it already
	default:
		// This controller wrote past the held partition epoch since the
		// restore: a new decision with the leader's state.
		next := held
		next.LeaderEpoch = max(held.LeaderEpoch, cur.LeaderEpoch) + 1
		next.PartitionEpoch = cur.PartitionEpoch
		c.log.Error("Taking the partition state the leader holds under new epochs: etcd went backwards and this controller wrote past it since",
			append(attrs, "new_leader_epoch", next.LeaderEpoch)...)
		return change{p: p, d: election.Decision{State: next, Changed: true,
			Reason: fmt.Sprintf("taken from leader %d under new epochs: etcd went backwards", from)}, cause: causeAdopt}, true
	}
}

package election

import (
	"fmt"
	"slices"
	"strings"

	"tidemark.io/services/platform/kerr"
)

// UnknownBrokerEpoch in a ReplicaState skips the broker epoch check for that
// replica, as Kafka does for -1 (KIP-903).
const UnknownBrokerEpoch int64 = -1

// ReplicaState is one member of a proposed ISR with the broker epoch the
// leader saw in its fetches (KIP-903).
type ReplicaState struct {
	ID          int32
	BrokerEpoch int64
}

// AlterPartitionRequest is one partition of a leader's AlterPartition request
// (F10, KIP-497).
type AlterPartitionRequest struct {
	// BrokerID and BrokerEpoch identify the sender.
	BrokerID    int32
	BrokerEpoch int64
	// LeaderEpoch and PartitionEpoch are the state the proposal is based on.
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []ReplicaState
}

// ISRIDs returns the proposed ISR's broker ids in request order.
func (r AlterPartitionRequest) ISRIDs() []int32 {
	ids := make([]int32, len(r.NewISR))
	for i, m := range r.NewISR {
		ids[i] = m.ID
	}
	return ids
}

// AlterPartition validates a leader's proposed ISR against the current state
// and the brokers, in Kafka's order (F10):
//
//  1. sender unregistered or with another broker epoch: STALE_BROKER_EPOCH;
//  2. newer partition or leader epoch than the controller's: NOT_CONTROLLER;
//  3. older leader epoch: FENCED_LEADER_EPOCH;
//  4. proposal equal to the current state: success, nothing to write
//     (checked before the partition epoch so a retried request succeeds);
//  5. older partition epoch: INVALID_UPDATE_VERSION;
//  6. sender not the leader, or an ISR that is empty, has duplicates, names
//     unassigned replicas or omits the leader: INVALID_REQUEST;
//  7. a proposed member unregistered, shutting down, or with a broker epoch
//     other than its registration's: INELIGIBLE_REPLICA (KIP-841, KIP-903).
//
// On success the Decision holds the new ISR with leader and leader epoch
// unchanged (a leader's ISR change does not bump the leader epoch); the store
// bumps the partition epoch when it writes.
func AlterPartition(p Partition, b Brokers, req AlterPartitionRequest) (Decision, error) {
	cur := p.State
	newISR := req.ISRIDs()

	// 1. F23: a bounced broker must not act on its previous incarnation's view.
	epoch, ok := b.Epochs[req.BrokerID]
	if !ok {
		return Decision{}, kerr.New(kerr.StaleBrokerEpoch, "broker %d is not registered", req.BrokerID)
	}
	if epoch != req.BrokerEpoch {
		return Decision{}, kerr.New(kerr.StaleBrokerEpoch,
			"broker %d sent broker epoch %d; its registration has epoch %d", req.BrokerID, req.BrokerEpoch, epoch)
	}
	// 2. The sender has seen a state this controller has not: it is likely
	// not the active controller any more, so the sender should find the new one.
	if req.PartitionEpoch > cur.PartitionEpoch || req.LeaderEpoch > cur.LeaderEpoch {
		return Decision{}, kerr.New(kerr.NotController,
			"request has leader epoch %d, partition epoch %d; controller has %d, %d",
			req.LeaderEpoch, req.PartitionEpoch, cur.LeaderEpoch, cur.PartitionEpoch)
	}
	// 3. A deposed leader.
	if req.LeaderEpoch < cur.LeaderEpoch {
		e := kerr.New(kerr.FencedLeaderEpoch, "request has leader epoch %d; current leader epoch is %d",
			req.LeaderEpoch, cur.LeaderEpoch)
		e.Leader = &kerr.LeaderHint{ID: cur.Leader, LeaderEpoch: cur.LeaderEpoch}
		return Decision{}, e
	}
	// 4. Idempotence: a retry of a request that was applied.
	if req.BrokerID == cur.Leader && slices.Equal(newISR, cur.ISR) {
		return unchanged(cur, fmt.Sprintf("ISR %v already committed", cur.ISR)), nil
	}
	// 5. The proposal was built on an older ISR.
	if req.PartitionEpoch < cur.PartitionEpoch {
		return Decision{}, kerr.New(kerr.InvalidUpdateVersion,
			"request has partition epoch %d; current partition epoch is %d", req.PartitionEpoch, cur.PartitionEpoch)
	}
	// 6. Shape checks (Kafka's KRaft controller makes them explicit).
	if err := checkProposedISR(p, req.BrokerID, newISR); err != nil {
		return Decision{}, err
	}
	// 7. KIP-841/KIP-903: only live, current incarnations may be in the ISR.
	if bad := ineligible(b, req.NewISR); len(bad) > 0 {
		return Decision{}, kerr.New(kerr.IneligibleReplica, "proposed ISR %v has ineligible replicas: %s",
			newISR, strings.Join(bad, "; "))
	}
	next := PartitionState{
		Leader:         cur.Leader,
		LeaderEpoch:    cur.LeaderEpoch,
		ISR:            newISR,
		PartitionEpoch: cur.PartitionEpoch,
	}
	return Decision{State: next, Changed: true,
		Reason: fmt.Sprintf("AlterPartition from leader %d: ISR %v -> %v", cur.Leader, cur.ISR, newISR)}, nil
}

// checkProposedISR rejects a sender that is not the leader and an ISR that is
// empty, repeats a broker, names an unassigned broker or leaves out the leader.
func checkProposedISR(p Partition, sender int32, isr []int32) error {
	if sender != p.State.Leader {
		return kerr.New(kerr.InvalidRequest, "broker %d is not the leader; the leader is %d", sender, p.State.Leader)
	}
	if len(isr) == 0 {
		return kerr.New(kerr.InvalidRequest, "proposed ISR is empty")
	}
	for i, id := range isr {
		if slices.Contains(isr[:i], id) {
			return kerr.New(kerr.InvalidRequest, "proposed ISR %v lists broker %d twice", isr, id)
		}
		if !p.Assignment.Contains(id) {
			return kerr.New(kerr.InvalidRequest, "proposed ISR %v names broker %d, which is not in the assignment %v",
				isr, id, []int32(p.Assignment))
		}
	}
	if !slices.Contains(isr, p.State.Leader) {
		return kerr.New(kerr.InvalidRequest, "proposed ISR %v does not contain the leader %d", isr, p.State.Leader)
	}
	return nil
}

// ineligible describes every proposed member that may not be in the ISR.
func ineligible(b Brokers, isr []ReplicaState) []string {
	var bad []string
	for _, m := range isr {
		epoch, ok := b.Epochs[m.ID]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%d is not registered", m.ID))
		case b.ShuttingDown[m.ID]:
			bad = append(bad, fmt.Sprintf("%d is shutting down", m.ID))
		case m.BrokerEpoch != UnknownBrokerEpoch && m.BrokerEpoch != epoch:
			bad = append(bad, fmt.Sprintf("%d has broker epoch %d in the request but %d registered", m.ID, m.BrokerEpoch, epoch))
		}
	}
	return bad
}

package partition

import (
	"fmt"
	"slices"
)

// ChangeKind is the direction of an ISR change.
type ChangeKind int

const (
	ExpandISR ChangeKind = iota + 1
	ShrinkISR
)

func (k ChangeKind) String() string {
	switch k {
	case ExpandISR:
		return "expand"
	case ShrinkISR:
		return "shrink"
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// BrokerState is an ISR member and the broker epoch the leader last saw from
// it (KIP-903); -1 when unknown, which the controller does not check.
type BrokerState struct {
	ID          int32
	BrokerEpoch int64
}

// AlterPartitionRequest is an ISR change the leader asks the controller to
// commit (F10, KIP-497). The broker adds its own broker id and epoch.
type AlterPartitionRequest struct {
	// Seq identifies the proposal; HandleAlterPartition ignores answers to
	// anything but the proposal in flight.
	Seq            uint64
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []BrokerState
}

// ISR returns the proposed ISR's broker ids.
func (r AlterPartitionRequest) ISR() []int32 {
	ids := make([]int32, len(r.NewISR))
	for i, b := range r.NewISR {
		ids[i] = b.ID
	}
	return ids
}

// Proposal is an ISR change waiting for the controller.
type Proposal struct {
	Kind ChangeKind
	// Replicas joins (expand) or leaves (shrink) the ISR.
	Replicas []int32
	// From is the committed ISR the change starts from; To the proposed one.
	From, To []int32
	Request  AlterPartitionRequest
	// Reason says why, with the state behind it (Kafka's shrink line
	// names each out-of-sync replica's end offset and last catch-up).
	Reason string
}

// LogLine is Kafka's log line for the change, e.g. "Shrinking ISR from
// 1,2,3 to 1,2".
func (pr Proposal) LogLine() string { return ISRChangeLine(pr.Kind, pr.From, pr.To) }

func (pr Proposal) clone() Proposal {
	pr.Replicas = slices.Clone(pr.Replicas)
	pr.From = slices.Clone(pr.From)
	pr.To = slices.Clone(pr.To)
	pr.Request.NewISR = slices.Clone(pr.Request.NewISR)
	return pr
}

// ISRChangeLine formats an ISR change in Kafka's words.
func ISRChangeLine(kind ChangeKind, from, to []int32) string {
	verb := "Expanding"
	if kind == ShrinkISR {
		verb = "Shrinking"
	}
	return fmt.Sprintf("%s ISR from %s to %s", verb, FormatIDs(from), FormatIDs(to))
}

// propose records a change as the one in flight and returns a copy for the
// caller to send.
func (p *Partition) propose(kind ChangeKind, changed, to []int32) Proposal {
	p.seq++
	states := make([]BrokerState, len(to))
	for i, id := range to {
		states[i] = BrokerState{ID: id, BrokerEpoch: p.knownBrokerEpoch(id)}
	}
	p.pending = &Proposal{
		Kind:     kind,
		Replicas: slices.Clone(changed),
		From:     slices.Clone(p.isr),
		To:       slices.Clone(to),
		Request: AlterPartitionRequest{
			Seq:            p.seq,
			Leader:         p.cfg.LocalID,
			LeaderEpoch:    p.leaderEpoch,
			PartitionEpoch: p.partitionEpoch,
			NewISR:         states,
		},
	}
	p.awaitingMetadata = false
	return p.pending.clone()
}

// knownBrokerEpoch is the epoch to send for an ISR member: the leader's own
// registration, or what the follower's last fetch carried.
func (p *Partition) knownBrokerEpoch(id int32) int64 {
	if id == p.cfg.LocalID {
		if p.cfg.Brokers != nil {
			if e, ok := p.cfg.Brokers.BrokerEpoch(id); ok {
				return e
			}
		}
		return -1
	}
	if f := p.followers[id]; f != nil && f.hasFetched {
		return f.brokerEpoch
	}
	return -1
}

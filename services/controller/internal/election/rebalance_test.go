package election

import (
	"fmt"
	"slices"
	"testing"
)

// prefParts returns n partitions of topic t, each assigned [pref, other]
// with both in the ISR, the first notLeading of them led by other.
func prefParts(t string, n, notLeading int, pref, other int32) map[TopicPartition]Partition {
	out := map[TopicPartition]Partition{}
	for i := range n {
		leader := pref
		if i < notLeading {
			leader = other
		}
		out[TopicPartition{t, int32(i)}] = Partition{
			Assignment: Assignment{pref, other},
			State:      PartitionState{Leader: leader, ISR: []int32{pref, other}},
		}
	}
	return out
}

func TestPlanRebalanceThreshold(t *testing.T) {
	tests := []struct {
		n, notLeading, pct int
		trigger            bool
	}{
		{n: 10, notLeading: 0, pct: 10, trigger: false},
		{n: 10, notLeading: 1, pct: 10, trigger: false}, // exactly 10%: not above
		{n: 10, notLeading: 2, pct: 10, trigger: true},
		{n: 9, notLeading: 1, pct: 10, trigger: true}, // 11.1%
		{n: 100, notLeading: 10, pct: 10, trigger: false},
		{n: 100, notLeading: 11, pct: 10, trigger: true},
		{n: 3, notLeading: 1, pct: 0, trigger: true},
		{n: 3, notLeading: 0, pct: 0, trigger: false},
		{n: 4, notLeading: 4, pct: 100, trigger: false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d_of_%d_at_%d%%", tt.notLeading, tt.n, tt.pct), func(t *testing.T) {
			plan := PlanRebalance(prefParts("t", tt.n, tt.notLeading, 1, 2), cluster(1, 2), tt.pct)
			if got := len(plan.Elect) > 0; got != tt.trigger {
				t.Fatalf("triggered = %v, want %v: %+v", got, tt.trigger, plan)
			}
			if tt.trigger && len(plan.Elect) != tt.notLeading {
				t.Fatalf("elect %v, want all %d partitions not led by their preferred replica", plan.Elect, tt.notLeading)
			}
		})
	}
}

func TestPlanRebalanceEligibility(t *testing.T) {
	parts := prefParts("a", 4, 4, 1, 2) // broker 1 leads none of its 4
	// a-0: preferred replica out of the ISR, so it cannot lead yet.
	p := parts[TopicPartition{"a", 0}]
	p.State.ISR = []int32{2}
	parts[TopicPartition{"a", 0}] = p
	// Broker 3 prefers b-0..b-1 and leads them: balanced.
	for tp, p := range prefParts("b", 2, 0, 3, 2) {
		parts[tp] = p
	}

	plan := PlanRebalance(parts, cluster(1, 2, 3), 10)
	want := []TopicPartition{{"a", 1}, {"a", 2}, {"a", 3}}
	if !slices.Equal(plan.Elect, want) {
		t.Fatalf("elect %v, want %v", plan.Elect, want)
	}
	if len(plan.Imbalanced) != 1 || plan.Imbalanced[0] != (BrokerImbalance{Broker: 1, Preferred: 4, NotLeading: 4}) {
		t.Fatalf("imbalanced %+v, want only broker 1 with 4 of 4", plan.Imbalanced)
	}

	// Preferred broker dead or shutting down: imbalanced, but nothing to elect.
	for name, b := range map[string]Brokers{"dead": cluster(2, 3), "shutting down": cluster(1, 2, 3).stopping(1)} {
		if plan := PlanRebalance(parts, b, 10); len(plan.Elect) != 0 || len(plan.Imbalanced) != 1 {
			t.Fatalf("%s preferred replica: plan %+v, want broker 1 imbalanced and nothing to elect", name, plan)
		}
	}
}

package election

import (
	"cmp"
	"slices"
)

// BrokerImbalance is one broker's share of partitions it should lead but
// does not.
type BrokerImbalance struct {
	Broker int32
	// Preferred counts partitions whose preferred replica is Broker.
	Preferred int
	// NotLeading counts those of them Broker does not lead.
	NotLeading int
}

// RebalancePlan is the outcome of one auto leader rebalance check (F21).
type RebalancePlan struct {
	// Imbalanced lists, by broker id, the brokers over the threshold.
	Imbalanced []BrokerImbalance
	// Elect lists, sorted, the partitions to give a preferred election.
	Elect []TopicPartition
}

// PlanRebalance runs Kafka's auto leader rebalance check (F21,
// checkAndTriggerAutoLeaderRebalance). For each broker B, the imbalance ratio
// is the number of partitions whose preferred replica is B but whose leader
// is not B, over the number whose preferred replica is B. If it exceeds
// imbalancePercentage/100 (strictly: exactly the threshold does not
// trigger), those of B's partitions whose preferred replica is live and in
// the ISR get a preferred election. The comparison is done in integers so no
// rounding can push a ratio over or under the threshold.
func PlanRebalance(parts map[TopicPartition]Partition, b Brokers, imbalancePercentage int) RebalancePlan {
	byBroker := map[int32][]TopicPartition{}
	for tp, p := range parts {
		if pref := p.Assignment.Preferred(); pref != NoLeader {
			byBroker[pref] = append(byBroker[pref], tp)
		}
	}
	var plan RebalancePlan
	for broker, tps := range byBroker {
		var notLeading []TopicPartition
		for _, tp := range tps {
			if parts[tp].State.Leader != broker {
				notLeading = append(notLeading, tp)
			}
		}
		if len(notLeading)*100 <= imbalancePercentage*len(tps) {
			continue
		}
		plan.Imbalanced = append(plan.Imbalanced,
			BrokerImbalance{Broker: broker, Preferred: len(tps), NotLeading: len(notLeading)})
		for _, tp := range notLeading {
			p := parts[tp]
			if b.Live(broker) && p.State.InISR(broker) {
				plan.Elect = append(plan.Elect, tp)
			}
		}
	}
	slices.SortFunc(plan.Imbalanced, func(x, y BrokerImbalance) int { return cmp.Compare(x.Broker, y.Broker) })
	slices.SortFunc(plan.Elect, func(x, y TopicPartition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return plan
}

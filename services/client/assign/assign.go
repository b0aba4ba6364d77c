// Package assign is the client side of a consumer group's partition
// assignment: the group leader runs an Assignor over every member's
// Subscription and sends each member its Assignment through SyncGroup.
// Both travel as Kafka's ConsumerProtocol bytes (encoding.go), so the
// group's metadata is the one Kafka's consumers exchange.
//
// Two assignors are built in, with Kafka's names and rules: "range"
// (eager: every member gives up everything before a rebalance) and
// "cooperative-sticky" (KIP-429: members keep what they own, give up only
// what moves, and a second rebalance hands out what was given up). Any
// other Assignor may be plugged into the group consumer.
package assign

import (
	"cmp"
	"slices"
)

// RebalanceProtocol is how members give partitions up during a rebalance.
type RebalanceProtocol int8

const (
	// Eager members revoke every partition before they rejoin.
	Eager RebalanceProtocol = iota
	// Cooperative members keep their partitions through the rebalance
	// and revoke only those their new assignment lacks (KIP-429).
	Cooperative
)

func (p RebalanceProtocol) String() string {
	if p == Cooperative {
		return "COOPERATIVE"
	}
	return "EAGER"
}

// TopicPartitions is some partitions of one topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// Member is one member of the group as JoinGroup shows it to the leader.
type Member struct {
	ID string
	// InstanceID is group.instance.id, "" for a dynamic member.
	InstanceID   string
	Subscription Subscription
}

// sortKey orders members as Kafka's assignors do: static members by
// instance id, dynamic ones by member id.
func (m Member) sortKey() string {
	if m.InstanceID != "" {
		return m.InstanceID
	}
	return m.ID
}

// Assignor computes a group's assignment on the leader.
type Assignor interface {
	// Name is the protocol name members announce in JoinGroup.
	Name() string
	// Protocol is whether members revoke everything before rejoining.
	Protocol() RebalanceProtocol
	// Assign maps each member id to its assignment. partitions holds the
	// partition count of every subscribed topic the cluster knows; topics
	// missing from it are left unassigned. The result must be a pure
	// function of its input and hold every member.
	Assign(members []Member, partitions map[string]int32) map[string]Assignment
	// UserData is what a member puts in its Subscription for this
	// assignor, given the generation it last joined (-1 for none).
	UserData(generation int32) []byte
}

// Named returns the assignor called name among the built-in ones.
func Named(name string) (Assignor, bool) {
	switch name {
	case RangeName:
		return Range{}, true
	case CooperativeStickyName:
		return CooperativeSticky{}, true
	}
	return nil, false
}

// tp is one topic-partition.
type tp struct {
	topic string
	part  int32
}

func (a tp) compare(b tp) int {
	if c := cmp.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.part, b.part)
}

// group turns a list of topic-partitions into sorted TopicPartitions.
func group(tps []tp) []TopicPartitions {
	tps = slices.Clone(tps)
	slices.SortFunc(tps, tp.compare)
	var out []TopicPartitions
	for _, x := range tps {
		if n := len(out); n > 0 && out[n-1].Topic == x.topic {
			out[n-1].Partitions = append(out[n-1].Partitions, x.part)
			continue
		}
		out = append(out, TopicPartitions{Topic: x.topic, Partitions: []int32{x.part}})
	}
	return out
}

// Flatten lists the topic-partitions of tps, sorted, without repeats.
func flatten(tps []TopicPartitions) []tp {
	var out []tp
	for _, t := range tps {
		for _, p := range t.Partitions {
			out = append(out, tp{t.Topic, p})
		}
	}
	slices.SortFunc(out, tp.compare)
	return slices.Compact(out)
}

// sortedMembers returns members in the assignors' order.
func sortedMembers(members []Member) []Member {
	ms := slices.Clone(members)
	slices.SortStableFunc(ms, func(a, b Member) int {
		if c := cmp.Compare(a.sortKey(), b.sortKey()); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return ms
}

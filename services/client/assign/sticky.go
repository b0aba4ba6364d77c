package assign

import (
	"encoding/binary"
	"slices"
)

// CooperativeStickyName is the cooperative sticky assignor's protocol name.
const CooperativeStickyName = "cooperative-sticky"

// CooperativeSticky is Kafka's CooperativeStickyAssignor (KIP-429 over
// KIP-54): the assignment is balanced over all members (partition counts
// differ by at most one where subscriptions allow), members keep as much
// of what they own as balance permits, and a partition that moves from one
// member to another is withheld from its new owner for this generation:
// the old owner revokes it, rejoins, and the next rebalance hands it out.
// So no partition is ever assigned while another member still owns it.
type CooperativeSticky struct{}

var _ Assignor = CooperativeSticky{}

func (CooperativeSticky) Name() string                { return CooperativeStickyName }
func (CooperativeSticky) Protocol() RebalanceProtocol { return Cooperative }

// UserData is the generation as 4 big-endian bytes, as Kafka's
// CooperativeStickyAssignor writes it for members of older protocol
// versions, which carry no generation field.
func (CooperativeSticky) UserData(generation int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(generation))
}

// generation is the generation a member's ownership claim belongs to:
// the subscription's field (v2+), else the user data's, else -1.
func (s Subscription) generation() int32 {
	if s.Generation >= 0 {
		return s.Generation
	}
	if len(s.UserData) == 4 {
		return int32(binary.BigEndian.Uint32(s.UserData))
	}
	return -1
}

func (CooperativeSticky) Assign(members []Member, partitions map[string]int32) map[string]Assignment {
	ms := sortedMembers(members)
	subs := make(map[string]map[string]bool, len(ms))
	var all []tp
	seenTopic := map[string]bool{}
	for _, m := range ms {
		subs[m.ID] = map[string]bool{}
		for _, t := range uniqueTopics(m.Subscription.Topics) {
			subs[m.ID][t] = true
			if n, ok := partitions[t]; ok && !seenTopic[t] {
				seenTopic[t] = true
				for p := range n {
					all = append(all, tp{t, p})
				}
			}
		}
	}
	slices.SortFunc(all, tp.compare)
	owner := validOwners(ms, subs, partitions)

	// What each member keeps of what it owns, in member order.
	load := map[string][]tp{}
	taken := map[tp]bool{}
	for _, m := range ms {
		for _, x := range flatten(m.Subscription.Owned) {
			if owner[x] == m.ID {
				load[m.ID] = append(load[m.ID], x)
			}
		}
	}
	if sameSubscriptions(ms, subs) && len(ms) > 0 {
		trimToQuota(ms, load, len(all))
	}
	for _, id := range keys(load) {
		for _, x := range load[id] {
			taken[x] = true
		}
	}
	// Hand out the rest, each to the least loaded member that may take it.
	for _, x := range all {
		if taken[x] {
			continue
		}
		if id := leastLoaded(ms, subs, load, x.topic, ""); id != "" {
			load[id] = append(load[id], x)
			taken[x] = true
		}
	}
	rebalanceMixed(ms, subs, load, owner)

	out := make(map[string]Assignment, len(ms))
	for _, m := range ms {
		var keep []tp
		for _, x := range load[m.ID] {
			// KIP-429: a partition still owned by someone else waits for
			// the next generation; its owner revokes it first.
			if o, ok := owner[x]; ok && o != m.ID {
				continue
			}
			if _, conflict := owner[x]; !conflict && claimed(ms, x) {
				continue
			}
			keep = append(keep, x)
		}
		out[m.ID] = Assignment{Partitions: group(keep)}
	}
	return out
}

// validOwners picks, for each partition some member claims to own, the
// member whose claim stands: the claim of the newest generation, by a
// member still subscribed to the topic, for a partition that still exists.
// Two claims of the same newest generation cancel each other: neither
// member keeps it, and it is handed out only once both have revoked it.
func validOwners(ms []Member, subs map[string]map[string]bool, partitions map[string]int32) map[tp]string {
	type claim struct {
		id       string
		gen      int32
		conflict bool
	}
	best := map[tp]claim{}
	for _, m := range ms {
		gen := m.Subscription.generation()
		for _, x := range flatten(m.Subscription.Owned) {
			if n, ok := partitions[x.topic]; !ok || x.part < 0 || x.part >= n || !subs[m.ID][x.topic] {
				continue
			}
			c, ok := best[x]
			switch {
			case !ok || gen > c.gen:
				best[x] = claim{id: m.ID, gen: gen}
			case gen == c.gen:
				c.conflict = true
				best[x] = c
			}
		}
	}
	owner := make(map[tp]string, len(best))
	for x, c := range best {
		if !c.conflict {
			owner[x] = c.id
		}
	}
	return owner
}

// claimed reports whether any member claims to own x.
func claimed(ms []Member, x tp) bool {
	for _, m := range ms {
		if slices.Contains(flatten(m.Subscription.Owned), x) {
			return true
		}
	}
	return false
}

// trimToQuota cuts what members keep to the balanced quota when all share
// one subscription: n/m each, and n%m of them one more (those that own the
// most keep the extra one, as in Kafka's constrained assignment).
func trimToQuota(ms []Member, load map[string][]tp, n int) {
	minQ, extra := n/len(ms), n%len(ms)
	order := slices.Clone(ms)
	slices.SortStableFunc(order, func(a, b Member) int { return len(load[b.ID]) - len(load[a.ID]) })
	for _, m := range order {
		q := minQ
		if extra > 0 && len(load[m.ID]) > minQ {
			q++
			extra--
		}
		if len(load[m.ID]) > q {
			load[m.ID] = load[m.ID][:q]
		}
	}
}

// rebalanceMixed moves partitions from the most to the least loaded
// members while some member has two more than another that could take one
// of its partitions: needed only when subscriptions differ. A partition
// its member does not own already moves first.
func rebalanceMixed(ms []Member, subs map[string]map[string]bool, load map[string][]tp, owner map[tp]string) {
	limit := 0
	for _, l := range load {
		limit += len(l)
	}
	limit *= len(ms)
	for range limit {
		moved := false
		order := slices.Clone(ms)
		slices.SortStableFunc(order, func(a, b Member) int { return len(load[b.ID]) - len(load[a.ID]) })
		for _, from := range order {
			best, bestTo := -1, ""
			for i, x := range load[from.ID] {
				to := leastLoaded(ms, subs, load, x.topic, from.ID)
				if to == "" || len(load[to])+2 > len(load[from.ID]) {
					continue
				}
				if best < 0 || (owner[x] == from.ID && owner[load[from.ID][best]] != from.ID) {
					best, bestTo = i, to
				}
				if owner[x] != from.ID {
					best, bestTo = i, to
					break
				}
			}
			if best >= 0 {
				x := load[from.ID][best]
				load[from.ID] = slices.Delete(load[from.ID], best, best+1)
				load[bestTo] = append(load[bestTo], x)
				moved = true
				break
			}
		}
		if !moved {
			return
		}
	}
}

// leastLoaded is the member subscribed to topic with the fewest
// partitions (the first in member order on a tie), other than except.
func leastLoaded(ms []Member, subs map[string]map[string]bool, load map[string][]tp, topic, except string) string {
	best := ""
	for _, m := range ms {
		if m.ID == except || !subs[m.ID][topic] {
			continue
		}
		if best == "" || len(load[m.ID]) < len(load[best]) {
			best = m.ID
		}
	}
	return best
}

func sameSubscriptions(ms []Member, subs map[string]map[string]bool) bool {
	for _, m := range ms[1:] {
		a, b := subs[ms[0].ID], subs[m.ID]
		if len(a) != len(b) {
			return false
		}
		for t := range a {
			if !b[t] {
				return false
			}
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// uniqueTopics returns topics sorted, without repeats.
func uniqueTopics(topics []string) []string {
	out := slices.Clone(topics)
	slices.Sort(out)
	return slices.Compact(out)
}

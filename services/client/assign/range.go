package assign

// RangeName is the range assignor's protocol name.
const RangeName = "range"

// Range is Kafka's RangeAssignor: for each topic on its own, the members
// subscribed to it (in instance-id, then member-id order) get consecutive
// ranges of its partitions, the first n%m members one more than the rest.
// It is eager.
type Range struct{}

var _ Assignor = Range{}

func (Range) Name() string                { return RangeName }
func (Range) Protocol() RebalanceProtocol { return Eager }
func (Range) UserData(int32) []byte       { return nil }

func (Range) Assign(members []Member, partitions map[string]int32) map[string]Assignment {
	ms := sortedMembers(members)
	byTopic := map[string][]string{} // topic → subscribed member ids, in order
	for _, m := range ms {
		for _, t := range uniqueTopics(m.Subscription.Topics) {
			byTopic[t] = append(byTopic[t], m.ID)
		}
	}
	got := map[string][]tp{}
	for topic, ids := range byTopic {
		n, ok := partitions[topic]
		if !ok || n <= 0 {
			continue
		}
		per, extra := int(n)/len(ids), int(n)%len(ids)
		for i, id := range ids {
			start := per*i + min(i, extra)
			length := per
			if i < extra {
				length++
			}
			for p := start; p < start+length; p++ {
				got[id] = append(got[id], tp{topic, int32(p)})
			}
		}
	}
	out := make(map[string]Assignment, len(ms))
	for _, m := range ms {
		out[m.ID] = Assignment{Partitions: group(got[m.ID])}
	}
	return out
}

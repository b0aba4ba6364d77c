package assign

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
)

// members builds n members subscribed to topics, ids m00, m01, ...
func members(n int, topics ...string) []Member {
	var out []Member
	for i := range n {
		out = append(out, Member{ID: fmt.Sprintf("m%02d", i), Subscription: Subscription{Topics: topics, Generation: -1}})
	}
	return out
}

// owners checks that no partition is assigned twice and that every
// partition of parts is assigned, returning who has each.
func owners(t *testing.T, got map[string]Assignment, parts map[string]int32, complete bool) map[tp]string {
	t.Helper()
	own := map[tp]string{}
	for id, a := range got {
		for _, x := range flatten(a.Partitions) {
			if o, dup := own[x]; dup {
				t.Fatalf("%s-%d assigned to %s and %s", x.topic, x.part, o, id)
			}
			if n, ok := parts[x.topic]; !ok || x.part >= n {
				t.Fatalf("%s-%d does not exist", x.topic, x.part)
			}
			own[x] = id
		}
	}
	if complete {
		for topic, n := range parts {
			for p := range n {
				if _, ok := own[tp{topic, p}]; !ok {
					t.Fatalf("%s-%d not assigned: %v", topic, p, got)
				}
			}
		}
	}
	return own
}

func counts(got map[string]Assignment, topic string) []int {
	var out []int
	for _, id := range keys(got) {
		n := 0
		for _, x := range flatten(got[id].Partitions) {
			if topic == "" || x.topic == topic {
				n++
			}
		}
		out = append(out, n)
	}
	return out
}

func spread(c []int) int { return slices.Max(c) - slices.Min(c) }

func TestRangeIsKafkas(t *testing.T) {
	// Kafka's documented example: t0 and t1 with 3 partitions each, two
	// consumers: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2].
	got := Range{}.Assign(members(2, "t0", "t1"), map[string]int32{"t0": 3, "t1": 3})
	want := map[string]Assignment{
		"m00": {Partitions: []TopicPartitions{{"t0", []int32{0, 1}}, {"t1", []int32{0, 1}}}},
		"m01": {Partitions: []TopicPartitions{{"t0", []int32{2}}, {"t1", []int32{2}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestRangeBalancesEachTopic(t *testing.T) {
	for _, c := range []struct{ members, parts int }{{1, 1}, {1, 7}, {3, 7}, {3, 3}, {4, 2}, {10, 50}, {7, 100}} {
		parts := map[string]int32{"a": int32(c.parts), "b": int32(c.parts + 1)}
		got := Range{}.Assign(members(c.members, "a", "b"), parts)
		owners(t, got, parts, true)
		for _, topic := range []string{"a", "b"} {
			if s := spread(counts(got, topic)); s > 1 {
				t.Errorf("%d members, %d partitions: %s spread %d: %v", c.members, c.parts, topic, s, counts(got, topic))
			}
		}
		if len(got) != c.members {
			t.Errorf("%d members in the result, want every member", len(got))
		}
	}
}

func TestRangeOrdersStaticMembersByInstanceID(t *testing.T) {
	ms := members(2, "t")
	ms[0].InstanceID, ms[1].InstanceID = "z", "a" // m01 sorts first
	got := Range{}.Assign(ms, map[string]int32{"t": 3})
	if want := []int32{0, 1}; !reflect.DeepEqual(got["m01"].Partitions[0].Partitions, want) {
		t.Fatalf("m01 got %v, want %v", got["m01"], want)
	}
}

func TestRangeSkipsUnknownTopicsAndMixedSubscriptions(t *testing.T) {
	ms := []Member{
		{ID: "a", Subscription: Subscription{Topics: []string{"x", "gone"}}},
		{ID: "b", Subscription: Subscription{Topics: []string{"x", "y"}}},
	}
	parts := map[string]int32{"x": 2, "y": 2}
	got := Range{}.Assign(ms, parts)
	owners(t, got, parts, true)
	if c := counts(got, "y"); c[0] != 0 || c[1] != 2 {
		t.Fatalf("y went to a member not subscribed: %v", got)
	}
}

// round is one cooperative rebalance: every member joins with what it
// owns; it then owns exactly its assignment (it revoked the rest). It
// fails the test if a partition is assigned while another member owns it.
func round(t *testing.T, ms []Member, parts map[string]int32, gen int32) ([]Member, map[string]Assignment) {
	t.Helper()
	got := CooperativeSticky{}.Assign(ms, parts)
	owners(t, got, parts, false)
	claim := map[tp]string{}
	for _, m := range ms {
		for _, x := range flatten(m.Subscription.Owned) {
			claim[x] = m.ID
		}
	}
	for id, a := range got {
		for _, x := range flatten(a.Partitions) {
			if o, ok := claim[x]; ok && o != id {
				t.Fatalf("%s-%d assigned to %s while %s still owns it", x.topic, x.part, id, o)
			}
		}
	}
	next := slices.Clone(ms)
	for i := range next {
		next[i].Subscription.Owned = got[next[i].ID].Partitions
		next[i].Subscription.Generation = gen
	}
	return next, got
}

// settle runs rounds until nothing changes (at most 3), returning the
// members, the final assignment and how many partitions changed hands.
func settle(t *testing.T, ms []Member, parts map[string]int32, gen *int32) ([]Member, map[string]Assignment) {
	t.Helper()
	var got map[string]Assignment
	for i := range 3 {
		*gen++
		var next []Member
		next, got = round(t, ms, parts, *gen)
		same := true
		for j := range ms {
			if !reflect.DeepEqual(flatten(ms[j].Subscription.Owned), flatten(next[j].Subscription.Owned)) {
				same = false
			}
		}
		ms = next
		if same && i > 0 {
			return ms, got
		}
	}
	if _, again := round(t, ms, parts, *gen+1); !reflect.DeepEqual(again, got) {
		t.Fatalf("assignment still moving after 3 rounds: %v then %v", got, again)
	}
	return ms, got
}

func moved(before, after []Member) int {
	own := map[tp]string{}
	for _, m := range before {
		for _, x := range flatten(m.Subscription.Owned) {
			own[x] = m.ID
		}
	}
	n := 0
	for _, m := range after {
		for _, x := range flatten(m.Subscription.Owned) {
			if o, ok := own[x]; ok && o != m.ID {
				n++
			}
		}
	}
	return n
}

func TestCooperativeStickyBalancesAndSticks(t *testing.T) {
	parts := map[string]int32{"a": 7, "b": 5}
	total := 12
	var gen int32
	ms, got := settle(t, members(1, "a", "b"), parts, &gen)
	owners(t, got, parts, true)
	for n := 2; n <= 7; n++ {
		joined := append(slices.Clone(ms), members(n, "a", "b")[n-1])
		before := ms
		ms, got = settle(t, joined, parts, &gen)
		owners(t, got, parts, true)
		if s := spread(counts(got, "")); s > 1 {
			t.Fatalf("%d members: spread %d: %v", n, s, counts(got, ""))
		}
		// A joiner takes only its share: total/n (rounded up) moves at most.
		if m, limit := moved(before, ms), (total+n-1)/n; m > limit {
			t.Fatalf("member %d joining moved %d partitions, want at most %d", n, m, limit)
		}
	}
	// A member leaves: only its partitions move.
	before := ms
	left := slices.Delete(slices.Clone(ms), 2, 3)
	leaving := len(flatten(ms[2].Subscription.Owned))
	ms, got = settle(t, left, parts, &gen)
	owners(t, got, parts, true)
	if s := spread(counts(got, "")); s > 1 {
		t.Fatalf("after a leave: spread %d", s)
	}
	if m := moved(before, ms); m > leaving {
		t.Fatalf("a member leaving moved %d partitions of others; it had %d", m, leaving)
	}
	_ = total
}

func TestCooperativeStickyIsDeterministic(t *testing.T) {
	ms := members(4, "a", "b")
	ms[1].Subscription.Owned = []TopicPartitions{{"a", []int32{0, 1, 2, 3, 4}}}
	ms[1].Subscription.Generation = 3
	parts := map[string]int32{"a": 9, "b": 3}
	first := CooperativeSticky{}.Assign(ms, parts)
	for range 20 {
		shuffled := slices.Clone(ms)
		slices.Reverse(shuffled)
		if got := (CooperativeSticky{}).Assign(shuffled, maps.Clone(parts)); !reflect.DeepEqual(got, first) {
			t.Fatalf("member order changed the result:\n%v\n%v", got, first)
		}
	}
}

func TestCooperativeStickyClaims(t *testing.T) {
	parts := map[string]int32{"t": 4}
	ms := members(2, "t")
	// Both claim t-0; m00's claim is newer and stands.
	ms[0].Subscription.Owned = []TopicPartitions{{"t", []int32{0}}}
	ms[0].Subscription.Generation = 5
	ms[1].Subscription.Owned = []TopicPartitions{{"t", []int32{0, 1}}}
	ms[1].Subscription.Generation = 4
	got := CooperativeSticky{}.Assign(ms, parts)
	if !slices.Contains(flatten(got["m00"].Partitions), tp{"t", 0}) {
		t.Fatalf("the newer claim lost t-0: %v", got)
	}
	// The same generation twice: nobody gets it this round.
	ms[1].Subscription.Generation = 5
	got = CooperativeSticky{}.Assign(ms, parts)
	own := owners(t, got, parts, false)
	if o, ok := own[tp{"t", 0}]; ok {
		t.Fatalf("t-0, claimed twice in one generation, went to %s", o)
	}
	// A claim on a partition that no longer exists, or a topic no longer
	// subscribed, is ignored.
	ms = members(1, "t")
	ms[0].Subscription.Owned = []TopicPartitions{{"t", []int32{9}}, {"u", []int32{0}}}
	got = CooperativeSticky{}.Assign(ms, parts)
	owners(t, got, parts, true)
	// Old members announce the generation in user data only.
	ms = members(2, "t")
	ms[0].Subscription.Owned = []TopicPartitions{{"t", []int32{0}}}
	ms[0].Subscription.UserData = CooperativeSticky{}.UserData(8)
	ms[1].Subscription.Owned = []TopicPartitions{{"t", []int32{0}}}
	ms[1].Subscription.Generation = 7
	if got := (CooperativeSticky{}).Assign(ms, parts); !slices.Contains(flatten(got["m00"].Partitions), tp{"t", 0}) {
		t.Fatalf("the user-data generation was not read: %v", got)
	}
}

func TestCooperativeStickyMixedSubscriptions(t *testing.T) {
	parts := map[string]int32{"a": 6, "b": 2}
	ms := []Member{
		{ID: "x", Subscription: Subscription{Topics: []string{"a", "b"}, Generation: -1}},
		{ID: "y", Subscription: Subscription{Topics: []string{"a"}, Generation: -1}},
		{ID: "z", Subscription: Subscription{Topics: []string{"b"}, Generation: -1}},
	}
	var gen int32
	_, got := settle(t, ms, parts, &gen)
	owners(t, got, parts, true)
	c := counts(got, "")
	if spread(c) > 1 {
		t.Fatalf("mixed subscriptions: %v", c)
	}
	for _, x := range flatten(got["z"].Partitions) {
		if x.topic != "b" {
			t.Fatalf("z got %v outside its subscription", x)
		}
	}
}

func TestNamed(t *testing.T) {
	for _, name := range []string{"range", "cooperative-sticky"} {
		a, ok := Named(name)
		if !ok || a.Name() != name {
			t.Fatalf("Named(%q) = %v, %v", name, a, ok)
		}
	}
	if _, ok := Named("roundrobin"); ok {
		t.Fatal("an unknown assignor was found")
	}
}

package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func plain(ids ...int32) []Broker {
	out := make([]Broker, len(ids))
	for i, id := range ids {
		out[i] = Broker{ID: id}
	}
	return out
}

func racked(m map[int32]string) []Broker {
	var out []Broker
	for id, r := range m {
		out = append(out, Broker{ID: id, Rack: r})
	}
	return out
}

// Kafka's documented layout for 5 brokers, 10 partitions, replication factor
// 3, fixed start index 0 (AdminUtils' comment and its replica assignment test).
func TestAssignKnownLayout(t *testing.T) {
	want := [][]int32{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}
	got, err := AssignReplicas(plain(4, 2, 0, 3, 1), 10, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !equalLayout(got, want) {
		t.Fatalf("layout\n%v\nwant\n%v", got, want)
	}
}

func TestAssignStartAndShift(t *testing.T) {
	tests := []struct {
		opts Options
		want [][]int32
	}{
		// Start at broker index 2: leaders 12, 13, 14, 10, ...; shift 1
		// puts the second replica two steps after the first.
		{Options{StartIndex: 2, Shift: 1}, [][]int32{
			{12, 14, 10}, {13, 10, 11}, {14, 11, 12}, {10, 12, 13}, {11, 13, 14},
			// Second round: the shift grows to 2.
			{12, 10, 11}, {13, 11, 12},
		}},
		// Shift 3 wraps to steps 4 and 1 (mod n-1 = 4).
		{Options{StartIndex: 0, Shift: 3}, [][]int32{
			{10, 14, 11}, {11, 10, 12}, {12, 11, 13}, {13, 12, 14}, {14, 13, 10},
			{10, 11, 12}, {11, 12, 13},
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.opts), func(t *testing.T) {
			got, err := AssignReplicas(plain(10, 11, 12, 13, 14), 7, 3, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !equalLayout(got, tt.want) {
				t.Fatalf("layout\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

// Adding partitions continues the walk: placing 10 partitions at once equals
// placing 4, then 6 more from FirstPartition 4 with the same options.
func TestAssignFirstPartitionContinues(t *testing.T) {
	for _, b := range [][]Broker{plain(0, 1, 2, 3), racked(map[int32]string{0: "a", 1: "a", 2: "b", 3: "c"})} {
		opts := Options{StartIndex: 1, Shift: 2}
		all, err := AssignReplicas(b, 10, 3, opts)
		if err != nil {
			t.Fatal(err)
		}
		head, _ := AssignReplicas(b, 4, 3, opts)
		opts.FirstPartition = 4
		tail, _ := AssignReplicas(b, 6, 3, opts)
		if !equalLayout(all, append(head, tail...)) {
			t.Fatalf("split placement %v + %v differs from %v", head, tail, all)
		}
	}
}

func TestRackAlternatedList(t *testing.T) {
	rackMap := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	if got := rackAlternated(sortedBrokers(racked(rackMap))); !slices.Equal(got, []int32{0, 3, 1, 5, 4, 2}) {
		t.Fatalf("alternated %v, want [0 3 1 5 4 2]", got)
	}
	delete(rackMap, 5)
	if got := rackAlternated(sortedBrokers(racked(rackMap))); !slices.Equal(got, []int32{0, 3, 1, 4, 2}) {
		t.Fatalf("alternated %v, want [0 3 1 4 2]", got)
	}
}

// Kafka's rack-aware example: the alternated list 0 3 1 5 4 2 walked with
// start index 0; partition 6 starts the second round with shift 1 × 3 racks.
func TestAssignRackAwareKnownLayout(t *testing.T) {
	rackMap := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	want := [][]int32{{0, 3, 1}, {3, 1, 5}, {1, 5, 4}, {5, 4, 2}, {4, 2, 0}, {2, 0, 3}, {0, 4, 2}}
	got, err := AssignReplicas(racked(rackMap), 7, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !equalLayout(got, want) {
		t.Fatalf("layout\n%v\nwant\n%v", got, want)
	}
}

// Properties that must hold for any start index and shift: no broker twice
// in a partition, every partition on min(rf, racks) racks, leaders spread
// so no broker leads more than one partition more than another.
func TestAssignProperties(t *testing.T) {
	layouts := map[string][]Broker{
		"no racks, 6 brokers":        plain(1, 2, 3, 4, 5, 6),
		"3 even racks":               racked(map[int32]string{0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}),
		"uneven racks":               racked(map[int32]string{0: "a", 1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "a"}),
		"2 racks, rf above racks":    racked(map[int32]string{1: "x", 2: "y", 3: "x", 4: "y", 5: "x"}),
		"one broker per rack":        racked(map[int32]string{7: "r1", 8: "r2", 9: "r3"}),
		"single rack":                racked(map[int32]string{1: "only", 2: "only", 3: "only"}),
		"single broker":              plain(42),
		"rack per broker, 5 brokers": racked(map[int32]string{0: "a", 1: "b", 2: "c", 3: "d", 4: "e"}),
	}
	r := rand.New(rand.NewPCG(7, 11))
	for name, brokers := range layouts {
		rackOf := map[int32]string{}
		for _, b := range brokers {
			rackOf[b.ID] = b.Rack
		}
		racks := countRacks(brokers)
		for rf := 1; rf <= len(brokers); rf++ {
			for _, partitions := range []int{1, len(brokers), 3*len(brokers) + 1, 50} {
				opts := RandomOptions(r, len(brokers))
				got, err := AssignReplicas(brokers, partitions, rf, opts)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(got) != partitions {
					t.Fatalf("%s: %d partitions placed, want %d", name, len(got), partitions)
				}
				leaders := map[int32]int{}
				for p, replicas := range got {
					if len(replicas) != rf {
						t.Fatalf("%s: partition %d has %v, want %d replicas", name, p, replicas, rf)
					}
					spanned := map[string]bool{}
					for i, id := range replicas {
						if slices.Contains(replicas[:i], id) {
							t.Fatalf("%s rf=%d %+v: partition %d repeats broker %d: %v", name, rf, opts, p, id, replicas)
						}
						spanned[rackOf[id]] = true
					}
					if want := min(rf, racks); len(spanned) != want {
						t.Fatalf("%s rf=%d %+v: partition %d %v spans %d racks, want %d", name, rf, opts, p, replicas, len(spanned), want)
					}
					leaders[replicas[0]]++
				}
				lo, hi := partitions, 0
				for _, b := range brokers {
					lo, hi = min(lo, leaders[b.ID]), max(hi, leaders[b.ID])
				}
				if hi-lo > 1 {
					t.Fatalf("%s rf=%d partitions=%d: leader counts %v are unbalanced", name, rf, partitions, leaders)
				}
			}
		}
	}
}

func TestAssignErrors(t *testing.T) {
	mixed := []Broker{{ID: 1, Rack: "a"}, {ID: 2}, {ID: 3, Rack: "b"}}
	tests := []struct {
		name       string
		brokers    []Broker
		partitions int
		rf         int
		mode       RackMode
		code       kerr.Code
		mentions   []string
	}{
		{"zero partitions", plain(1, 2), 0, 1, RackEnforced, kerr.InvalidPartitions, []string{"0"}},
		{"negative partitions", plain(1, 2), -3, 1, RackEnforced, kerr.InvalidPartitions, []string{"-3"}},
		{"too many partitions", plain(1, 2), MaxPartitions + 1, 1, RackEnforced, kerr.InvalidPartitions, []string{"10001", "10000"}},
		{"zero replication factor", plain(1, 2), 1, 0, RackEnforced, kerr.InvalidReplicationFactor, []string{"0"}},
		{"factor above brokers", plain(1, 2, 3, 4, 5), 1, 6, RackEnforced, kerr.InvalidReplicationFactor, []string{"6", "5"}},
		{"no brokers", nil, 1, 1, RackEnforced, kerr.InvalidReplicationFactor, []string{"1", "0"}},
		{"some brokers without rack", mixed, 3, 2, RackEnforced, kerr.InvalidReplicaAssignment, []string{"2 of 3"}},
		{"duplicate broker", plain(1, 2, 1), 3, 2, RackEnforced, kerr.InvalidRequest, []string{"1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := AssignReplicas(tt.brokers, tt.partitions, tt.rf, Options{Racks: tt.mode})
			if kerr.CodeOf(err) != tt.code {
				t.Fatalf("error %v, want code %v", err, tt.code)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestAssignRackModes(t *testing.T) {
	mixed := []Broker{{ID: 1, Rack: "a"}, {ID: 2}, {ID: 3, Rack: "b"}, {ID: 4, Rack: "a"}}
	full := []Broker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}, {ID: 4, Rack: "b"}}
	unaware, _ := AssignReplicas(plain(1, 2, 3, 4), 8, 2, Options{})
	aware, _ := AssignReplicas(full, 8, 2, Options{})
	if equalLayout(unaware, aware) {
		t.Fatal("test brokers do not tell rack-aware from rack-unaware placement")
	}
	tests := []struct {
		name    string
		brokers []Broker
		mode    RackMode
		want    [][]int32
	}{
		{"safe with some racks missing ignores racks", mixed, RackSafe, unaware},
		{"disabled ignores racks", full, RackDisabled, unaware},
		{"enforced with all racks uses them", full, RackEnforced, aware},
		{"safe with all racks uses them", full, RackSafe, aware},
	}
	for _, tt := range tests {
		got, err := AssignReplicas(tt.brokers, 8, 2, Options{Racks: tt.mode})
		if err != nil || !equalLayout(got, tt.want) {
			t.Errorf("%s: %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

func TestAssignIgnoresInputOrder(t *testing.T) {
	a, _ := AssignReplicas(plain(3, 1, 2, 0), 6, 2, Options{StartIndex: 1, Shift: 1})
	b, _ := AssignReplicas(plain(0, 1, 2, 3), 6, 2, Options{StartIndex: 1, Shift: 1})
	if !equalLayout(a, b) {
		t.Fatalf("placement depends on input order: %v vs %v", a, b)
	}
}

func TestRandomOptions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		o := RandomOptions(r, 5)
		if o.StartIndex < 0 || o.StartIndex >= 5 || o.Shift < 0 || o.Shift >= 5 {
			t.Fatalf("RandomOptions out of range: %+v", o)
		}
	}
	if o := RandomOptions(r, 0); o != (Options{}) {
		t.Fatalf("RandomOptions with no brokers = %+v", o)
	}
	x := RandomOptions(rand.New(rand.NewPCG(9, 9)), 7)
	y := RandomOptions(rand.New(rand.NewPCG(9, 9)), 7)
	if x != y {
		t.Fatal("RandomOptions is not determined by its source")
	}
}

func sortedBrokers(b []Broker) []Broker {
	b = slices.Clone(b)
	slices.SortFunc(b, func(x, y Broker) int { return int(x.ID - y.ID) })
	return b
}

func equalLayout(a, b [][]int32) bool {
	return slices.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

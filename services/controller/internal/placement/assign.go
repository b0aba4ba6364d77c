package placement

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"tidemark.io/services/platform/kerr"
)

// Broker is a broker as placement sees it. Rack is empty when the broker
// has no rack.
type Broker struct {
	ID   int32
	Rack string
}

// RackMode says what to do with rack information, as Kafka's RackAwareMode.
type RackMode int

const (
	// RackEnforced uses racks when every broker has one, ignores them when
	// none has, and refuses to place replicas when only some have.
	RackEnforced RackMode = iota
	// RackSafe uses racks only when every broker has one.
	RackSafe
	// RackDisabled ignores racks.
	RackDisabled
)

// Options fixes the choices Kafka makes at random, so a placement is
// reproducible. Use RandomOptions for a fresh topic.
type Options struct {
	// StartIndex is the position, in the broker list the algorithm walks
	// (sorted by id, or rack-alternated), of partition FirstPartition's
	// first replica.
	StartIndex int
	// Shift is Kafka's nextReplicaShift: how far after the first replica
	// the second is placed. It grows by one with every full round of
	// partitions over the brokers.
	Shift int
	// FirstPartition is the id of the first partition to place: 0 for a new
	// topic, the current partition count when adding partitions.
	FirstPartition int32
	Racks          RackMode
}

// RandomOptions draws the start index and the shift independently, as Kafka
// does when no fixed start index is given.
func RandomOptions(r *rand.Rand, brokers int) Options {
	if brokers <= 0 {
		return Options{}
	}
	return Options{StartIndex: r.IntN(brokers), Shift: r.IntN(brokers)}
}

// AssignReplicas places partitions × replicationFactor replicas on brokers
// with Kafka's round robin (AdminUtils.assignReplicasToBrokers). Result[i]
// is the replica list of partition opts.FirstPartition+i; its head is the
// preferred leader.
//
// Without racks, the brokers are sorted by id. Partition p's first replica
// is broker (p+StartIndex) mod n, spreading leaders evenly; its other
// replicas follow at distance 1+(shift+j) mod (n-1), so followers of one
// leader do not always land on the same brokers. With racks, the same walk
// runs over a rack-alternated broker list (one broker from each rack in
// turn), with the shift scaled by the number of racks, and a candidate is
// skipped while its rack already holds a replica and some rack holds none,
// or while it holds one and some broker holds none: every partition spans
// min(replicationFactor, racks) racks.
//
// It fails with INVALID_PARTITIONS for partitions < 1 and
// INVALID_REPLICATION_FACTOR for a factor below 1 or above the number of
// brokers.
// MaxPartitions bounds one topic's partition count: every partition costs
// etcd keys, a state on every replica and a place in every metadata answer,
// so an absurd count is refused rather than attempted.
const MaxPartitions = 10000

func AssignReplicas(brokers []Broker, partitions, replicationFactor int, opts Options) ([][]int32, error) {
	if partitions < 1 {
		return nil, kerr.New(kerr.InvalidPartitions, "number of partitions must be at least 1, got %d", partitions)
	}
	if partitions > MaxPartitions {
		return nil, kerr.New(kerr.InvalidPartitions, "number of partitions must be at most %d, got %d", MaxPartitions, partitions)
	}
	if replicationFactor < 1 {
		return nil, kerr.New(kerr.InvalidReplicationFactor, "replication factor must be at least 1, got %d", replicationFactor)
	}
	if replicationFactor > len(brokers) {
		return nil, kerr.New(kerr.InvalidReplicationFactor,
			"replication factor %d is larger than the number of available brokers, %d", replicationFactor, len(brokers))
	}
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].ID == sorted[i-1].ID {
			return nil, kerr.New(kerr.InvalidRequest, "broker %d is listed twice", sorted[i].ID)
		}
	}
	useRacks, err := rackAware(sorted, opts.Racks)
	if err != nil {
		return nil, err
	}
	if useRacks {
		return assignRackAware(sorted, partitions, replicationFactor, opts), nil
	}
	ids := make([]int32, len(sorted))
	for i, b := range sorted {
		ids[i] = b.ID
	}
	return assignRoundRobin(ids, partitions, replicationFactor, opts), nil
}

// rackAware decides whether to use racks under mode.
func rackAware(brokers []Broker, mode RackMode) (bool, error) {
	withRack := 0
	for _, b := range brokers {
		if b.Rack != "" {
			withRack++
		}
	}
	switch {
	case mode == RackDisabled || withRack == 0:
		return false, nil
	case withRack == len(brokers):
		return true, nil
	case mode == RackSafe:
		return false, nil
	default:
		return false, kerr.New(kerr.InvalidReplicaAssignment,
			"only %d of %d brokers have a rack; rack-aware placement needs all of them", withRack, len(brokers))
	}
}

// assignRoundRobin is the rack-unaware walk over brokers sorted by id.
func assignRoundRobin(brokers []int32, partitions, rf int, opts Options) [][]int32 {
	n := len(brokers)
	out := make([][]int32, 0, partitions)
	shift := opts.Shift
	for p := int(opts.FirstPartition); p < int(opts.FirstPartition)+partitions; p++ {
		// Kafka moves the followers one step further along after every
		// full round of first replicas.
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + opts.StartIndex) % n
		replicas := []int32{brokers[first]}
		for j := range rf - 1 {
			replicas = append(replicas, brokers[followerIndex(first, shift, j, n)])
		}
		out = append(out, replicas)
	}
	return out
}

// assignRackAware is the walk over the rack-alternated list.
func assignRackAware(brokers []Broker, partitions, rf int, opts Options) [][]int32 {
	rackOf := make(map[int32]string, len(brokers))
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
	}
	arranged := rackAlternated(brokers)
	n := len(arranged)
	numRacks := countRacks(brokers)

	out := make([][]int32, 0, partitions)
	shift := opts.Shift
	for p := int(opts.FirstPartition); p < int(opts.FirstPartition)+partitions; p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + opts.StartIndex) % n
		leader := arranged[first]
		replicas := []int32{leader}
		racks := map[string]bool{rackOf[leader]: true}
		used := map[int32]bool{leader: true}
		k := 0
		for range rf - 1 {
			for {
				b := arranged[followerIndex(first, shift*numRacks, k, n)]
				k++
				r := rackOf[b]
				// Spread over racks first, then over brokers; relax each
				// rule only once it can no longer be met.
				if (racks[r] && len(racks) < numRacks) || (used[b] && len(used) < n) {
					continue
				}
				replicas = append(replicas, b)
				racks[r] = true
				used[b] = true
				break
			}
		}
		out = append(out, replicas)
	}
	return out
}

// followerIndex is where the j-th follower of the replica at index first
// goes: never on first itself, since the step is in [1, n-1].
func followerIndex(first, shift, j, n int) int {
	step := 1 + (shift+j)%(n-1)
	return (first + step) % n
}

// rackAlternated lists brokers taking one from each rack in turn, racks in
// name order and brokers by id within a rack: racks a:{0,1,2} b:{3,4} c:{5}
// give 0 3 5 1 4 2. brokers must be sorted by id.
func rackAlternated(brokers []Broker) []int32 {
	byRack := map[string][]int32{}
	var racks []string
	for _, b := range brokers {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	slices.Sort(racks)
	out := make([]int32, 0, len(brokers))
	for round := 0; len(out) < len(brokers); round++ {
		for _, r := range racks {
			if round < len(byRack[r]) {
				out = append(out, byRack[r][round])
			}
		}
	}
	return out
}

func countRacks(brokers []Broker) int {
	seen := map[string]bool{}
	for _, b := range brokers {
		seen[b.Rack] = true
	}
	return len(seen)
}

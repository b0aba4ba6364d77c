package placement

import (
	"slices"

	"tidemark.io/services/platform/kerr"
)

// ValidateAssignment checks a replica assignment a client supplied, keyed by
// partition id, against the registered brokers, and returns it as a slice
// indexed by partition. It fails with INVALID_REPLICA_ASSIGNMENT when the
// assignment is empty, a partition has no replicas or repeats a broker,
// names an unknown broker, the partition ids are not 0..n-1, or partitions
// have different replica counts.
func ValidateAssignment(assignment map[int32][]int32, brokers []Broker) ([][]int32, error) {
	if len(assignment) == 0 {
		return nil, kerr.New(kerr.InvalidReplicaAssignment, "assignment has no partitions")
	}
	if len(assignment) > MaxPartitions {
		return nil, kerr.New(kerr.InvalidPartitions, "number of partitions must be at most %d, got %d", MaxPartitions, len(assignment))
	}
	known := make(map[int32]bool, len(brokers))
	for _, b := range brokers {
		known[b.ID] = true
	}
	out := make([][]int32, len(assignment))
	for p, replicas := range assignment {
		if p < 0 || int(p) >= len(assignment) {
			return nil, kerr.New(kerr.InvalidReplicaAssignment,
				"partition ids must be 0..%d for %d partitions, got partition %d", len(assignment)-1, len(assignment), p)
		}
		out[p] = slices.Clone(replicas)
	}
	// Checked in partition order so the error is the same on every run.
	for p, replicas := range out {
		if len(replicas) == 0 {
			return nil, kerr.New(kerr.InvalidReplicaAssignment, "partition %d has no replicas", p)
		}
		for i, id := range replicas {
			if slices.Contains(replicas[:i], id) {
				return nil, kerr.New(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice in %v", p, id, replicas)
			}
			if !known[id] {
				return nil, kerr.New(kerr.InvalidReplicaAssignment, "partition %d names unknown broker %d in %v", p, id, replicas)
			}
		}
		if len(replicas) != len(out[0]) {
			return nil, kerr.New(kerr.InvalidReplicaAssignment,
				"partition %d has %d replicas but partition 0 has %d; all partitions need the same number",
				p, len(replicas), len(out[0]))
		}
	}
	return out, nil
}

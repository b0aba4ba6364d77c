// Package reassignplan computes partition reassignment plans for tools
// (kafka-reassign-partitions --generate, broker decommissioning): pure
// functions over a topic's current assignment and the brokers to use,
// placing replicas with the controller's own placement rules.
package reassignplan

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"tidemark.io/services/controller/internal/placement"
	"tidemark.io/services/platform/kerr"
)

// Broker is a broker a plan may place replicas on; Rack may be empty.
type Broker = placement.Broker

// Generate places every partition of each topic anew on brokers, keeping
// each topic's partition count and replication factor, with Kafka's
// rack-aware round robin from a random start (as --generate does).
// current maps topic -> partition -> replicas.
func Generate(current map[string]map[int32][]int32, brokers []Broker, rackAware bool, r *rand.Rand) (map[string]map[int32][]int32, error) {
	if len(brokers) == 0 {
		return nil, kerr.New(kerr.InvalidReplicaAssignment, "the broker list is empty")
	}
	mode := placement.RackEnforced
	if !rackAware {
		mode = placement.RackDisabled
	}
	out := map[string]map[int32][]int32{}
	for _, topic := range slices.Sorted(maps.Keys(current)) {
		parts := current[topic]
		if len(parts) == 0 {
			continue
		}
		rf := len(parts[0])
		opts := placement.RandomOptions(r, len(brokers))
		opts.Racks = mode
		asg, err := placement.AssignReplicas(brokers, len(parts), rf, opts)
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		out[topic] = map[int32][]int32{}
		for p, reps := range asg {
			out[topic][int32(p)] = reps
		}
	}
	return out, nil
}

// MoveOff replaces broker gone in every replica list that holds it, keeping
// its position (a preferred leader's place goes to its replacement). The
// replacement is a broker of live that the partition does not use: one in
// gone's rack when there is one, else one in a rack the partition does not
// use yet, the least loaded first (replicas counted over the whole plan,
// then the lowest id). Partitions without gone are left out of the result.
func MoveOff(current map[string]map[int32][]int32, live []Broker, gone int32) (map[string]map[int32][]int32, error) {
	rack := map[int32]string{}
	load := map[int32]int{}
	for _, b := range live {
		rack[b.ID] = b.Rack
		load[b.ID] = 0
	}
	for _, parts := range current {
		for _, reps := range parts {
			for _, id := range reps {
				if _, ok := load[id]; ok {
					load[id]++
				}
			}
		}
	}
	goneRack := ""
	for _, b := range live {
		if b.ID == gone {
			goneRack = b.Rack
		}
	}
	out := map[string]map[int32][]int32{}
	for _, topic := range slices.Sorted(maps.Keys(current)) {
		for _, p := range slices.Sorted(maps.Keys(current[topic])) {
			reps := current[topic][p]
			i := slices.Index(reps, gone)
			if i < 0 {
				continue
			}
			used := map[string]bool{}
			for _, id := range reps {
				if id != gone {
					used[rack[id]] = true
				}
			}
			var cands []Broker
			for _, b := range live {
				if b.ID != gone && !slices.Contains(reps, b.ID) {
					cands = append(cands, b)
				}
			}
			if len(cands) == 0 {
				return nil, kerr.New(kerr.InvalidReplicaAssignment,
					"%s-%d: no broker outside %v to take broker %d's replica", topic, p, reps, gone)
			}
			score := func(b Broker) int {
				switch {
				case goneRack != "" && b.Rack == goneRack:
					return 0
				case !used[b.Rack]:
					return 1
				}
				return 2
			}
			pick := slices.MinFunc(cands, func(x, y Broker) int {
				return cmp.Or(cmp.Compare(score(x), score(y)), cmp.Compare(load[x.ID], load[y.ID]), cmp.Compare(x.ID, y.ID))
			})
			next := slices.Clone(reps)
			next[i] = pick.ID
			load[pick.ID]++
			if out[topic] == nil {
				out[topic] = map[int32][]int32{}
			}
			out[topic][p] = next
		}
	}
	return out, nil
}

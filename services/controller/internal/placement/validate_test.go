package placement

import (
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestValidateAssignment(t *testing.T) {
	brokers := plain(1, 2, 3)
	tests := []struct {
		name     string
		in       map[int32][]int32
		mentions string // empty: valid
	}{
		{name: "valid", in: map[int32][]int32{1: {2, 3}, 0: {1, 2}, 2: {3, 1}}},
		{name: "single partition, single replica", in: map[int32][]int32{0: {3}}},
		{name: "empty", in: nil, mentions: "no partitions"},
		{name: "partition without replicas", in: map[int32][]int32{0: {1}, 1: {}}, mentions: "partition 1 has no replicas"},
		{name: "duplicate broker", in: map[int32][]int32{0: {1, 2, 1}}, mentions: "broker 1 twice"},
		{name: "unknown broker", in: map[int32][]int32{0: {1, 9}}, mentions: "unknown broker 9"},
		{name: "negative broker", in: map[int32][]int32{0: {1, -1}}, mentions: "unknown broker -1"},
		{name: "gap in partition ids", in: map[int32][]int32{0: {1}, 2: {2}}, mentions: "partition 2"},
		{name: "not starting at 0", in: map[int32][]int32{1: {1}}, mentions: "partition 1"},
		{name: "negative partition", in: map[int32][]int32{-1: {1}, 0: {2}}, mentions: "partition -1"},
		{name: "inconsistent replica counts", in: map[int32][]int32{0: {1, 2}, 1: {3}}, mentions: "partition 1 has 1 replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ValidateAssignment(tt.in, brokers)
			if tt.mentions == "" {
				if err != nil {
					t.Fatal(err)
				}
				for p, replicas := range got {
					if !equalLayout([][]int32{replicas}, [][]int32{tt.in[int32(p)]}) {
						t.Fatalf("partition %d = %v, want %v", p, replicas, tt.in[int32(p)])
					}
				}
				return
			}
			if kerr.CodeOf(err) != kerr.InvalidReplicaAssignment || !strings.Contains(err.Error(), tt.mentions) {
				t.Fatalf("error %v, want INVALID_REPLICA_ASSIGNMENT mentioning %q", err, tt.mentions)
			}
		})
	}
}

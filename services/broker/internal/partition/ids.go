package partition

import (
	"slices"
	"strconv"
	"strings"
)

// ISRs keep the order the controller gives them, as Kafka's do: a replica
// that rejoins is added at the end (Kafka's prepareIsrExpand adds it to an
// immutable Scala set, which keeps insertion order up to four members), one
// that leaves is taken out where it was, so an ISR of 3,1,2 that lost and
// regained broker 1 reads 3,2,1, as Kafka's tools and clients show it.
// Duplicates are dropped. Assignments (AR) keep their order too.

func distinctIDs(ids []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func withID(ids []int32, id int32) []int32 {
	return distinctIDs(append(slices.Clone(ids), id))
}

func withoutIDs(ids, drop []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

// FormatIDs renders broker ids the way Kafka's log lines do: "1,2,3".
func FormatIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

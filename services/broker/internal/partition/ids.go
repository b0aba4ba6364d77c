package partition

import (
	"slices"
	"strconv"
	"strings"
)

// ISRs are kept sorted and free of duplicates, so that comparisons, proposals
// and log lines are deterministic. Assignments (AR) keep their order.

func sortedIDs(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func withID(ids []int32, id int32) []int32 {
	return sortedIDs(append(slices.Clone(ids), id))
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

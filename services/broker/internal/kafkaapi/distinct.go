package kafkaapi

import "tidemark.io/services/broker/internal/replica"

// lastOfEach reads a request's topic-partition entries as Kafka's broker
// does, into a map keyed by topic-partition: a partition named more than
// once keeps its last entry, served and answered once, at the place of its
// first entry and under its topic's first entry. The request is returned
// as it is when nothing repeats.
func lastOfEach[T, P any](topics []T, name func(*T) string, parts func(*T) *[]P, index func(*P) int32) []T {
	if len(topics) == 1 && len(*parts(&topics[0])) <= 1 {
		return topics // the usual produce: nothing can repeat, no map
	}
	seen := map[replica.TP]bool{}
	repeats := false
	for i := range topics {
		t := &topics[i]
		for j := range *parts(t) {
			tp := replica.TP{Topic: name(t), Partition: index(&(*parts(t))[j])}
			repeats = repeats || seen[tp]
			seen[tp] = true
		}
	}
	if !repeats {
		return topics
	}
	var out []T
	topicAt := map[string]int{}
	placed := map[replica.TP]int{} // index in its topic's partitions
	for i := range topics {
		t := &topics[i]
		at, ok := topicAt[name(t)]
		if !ok {
			at = len(out)
			topicAt[name(t)] = at
			nt := *t
			*parts(&nt) = nil
			out = append(out, nt)
		}
		dst := parts(&out[at])
		for _, p := range *parts(t) {
			tp := replica.TP{Topic: name(t), Partition: index(&p)}
			if j, ok := placed[tp]; ok {
				(*dst)[j] = p // a later entry replaces the earlier one
				continue
			}
			placed[tp] = len(*dst)
			*dst = append(*dst, p)
		}
	}
	return out
}

// repeatedKeys reports, for each item, whether another item has the same
// key: requests that refuse every entry of a repeated name (wherever it
// appears) check each entry against it.
func repeatedKeys[T any, K comparable](items []T, key func(*T) K) []bool {
	count := make(map[K]int, len(items))
	for i := range items {
		count[key(&items[i])]++
	}
	out := make([]bool, len(items))
	for i := range items {
		out[i] = count[key(&items[i])] > 1
	}
	return out
}

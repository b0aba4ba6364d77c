package metastore

import (
	"crypto/rand"
	"encoding/base64"
	"slices"

	"tidemark.io/services/platform/kerr"
)

// checkTopic refuses names that are not legal topic names: such a name could
// address some other key (it might contain "/").
func checkTopic(name string) error {
	if !ValidTopicName(name) {
		return kerr.BadField(kerr.InvalidTopicException, "topic", "%q is not a legal topic name", name)
	}
	return nil
}

// ValidTopicName reports whether name is a legal topic name: 1–249
// characters from [a-zA-Z0-9._-], and not "." or "..", as in Kafka.
func ValidTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

func validateNewTopic(t NewTopic) error {
	if !ValidTopicName(t.Name) {
		return kerr.BadField(kerr.InvalidTopicException, "name", "%q is not a legal topic name", t.Name)
	}
	if len(t.Replicas) == 0 {
		return kerr.BadField(kerr.InvalidPartitions, "replicas", "topic %q has no partitions", t.Name)
	}
	for p := range int32(len(t.Replicas)) {
		reps, ok := t.Replicas[p]
		if !ok {
			return kerr.BadField(kerr.InvalidPartitions, "replicas", "partitions must be numbered 0..%d; %d is missing", len(t.Replicas)-1, p)
		}
		if len(reps) == 0 {
			return kerr.BadField(kerr.InvalidReplicaAssignment, "replicas", "partition %d has no replicas", p)
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if r < 0 || seen[r] {
				return kerr.BadField(kerr.InvalidReplicaAssignment, "replicas", "partition %d: bad or repeated replica %d", p, r)
			}
			seen[r] = true
		}
		st, ok := t.States[p]
		if !ok {
			return kerr.BadField(kerr.InvalidRequest, "states", "partition %d has no initial state", p)
		}
		for _, r := range st.ISR {
			if !seen[r] {
				return kerr.BadField(kerr.InvalidRequest, "states", "partition %d: ISR member %d is not a replica", p, r)
			}
		}
		if st.Leader != -1 && !slices.Contains(st.ISR, st.Leader) {
			return kerr.BadField(kerr.InvalidRequest, "states", "partition %d: leader %d is not in the ISR", p, st.Leader)
		}
	}
	if len(t.States) != len(t.Replicas) {
		return kerr.BadField(kerr.InvalidRequest, "states", "states name partitions the topic does not have")
	}
	return nil
}

// newTopicID returns 16 random bytes in URL-safe base64, like Kafka's topic ids.
func newTopicID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

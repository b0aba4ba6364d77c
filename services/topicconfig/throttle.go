package topicconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// ThrottledReplicas is a parsed leader.replication.throttled.replicas or
// follower.replication.throttled.replicas value.
type ThrottledReplicas struct {
	All   bool
	pairs map[[2]int32]bool
}

// Has reports whether the replica of partition on broker is listed.
func (t ThrottledReplicas) Has(partition, broker int32) bool {
	return t.All || t.pairs[[2]int32{partition, broker}]
}

// ParseThrottledReplicas parses Kafka's throttled-replicas list:
// "partition:broker" pairs separated by commas, "*" for every replica, or
// empty for none.
func ParseThrottledReplicas(s string) (ThrottledReplicas, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return ThrottledReplicas{All: true}, nil
	}
	out := ThrottledReplicas{pairs: map[[2]int32]bool{}}
	if s == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		p, b, ok := strings.Cut(pair, ":")
		pn, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bn, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if !ok || err1 != nil || err2 != nil || pn < 0 || bn < 0 {
			return ThrottledReplicas{}, fmt.Errorf("%q is not partition:broker (use a comma-separated list of them, or *)", pair)
		}
		out.pairs[[2]int32{int32(pn), int32(bn)}] = true
	}
	return out, nil
}

func checkThrottledReplicas(s string) error {
	_, err := ParseThrottledReplicas(s)
	return err
}

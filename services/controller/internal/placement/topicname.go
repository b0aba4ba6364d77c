// Package placement holds the controller's pure topic-creation decisions:
// topic name collisions (the name rules themselves are
// topicconfig.ValidateTopicName, which brokers apply too), replica assignment (Kafka's rack-aware round robin) and
// the checks on an assignment a client supplies.
package placement

import (
	"fmt"
	"slices"
	"strings"

	"tidemark.io/services/platform/kerr"
)

// CollisionKey maps a topic name to the name its metrics would use: Kafka
// replaces '.' with '_' there, so "a.b" and "a_b" collide.
func CollisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// CheckCollision rejects a new topic whose name differs from an existing
// topic's only by '.' versus '_' (Kafka refuses to create it), with
// INVALID_TOPIC_EXCEPTION naming the topics it collides with.
func CheckCollision(name string, existing []string) error {
	key := CollisionKey(name)
	var clash []string
	for _, e := range existing {
		if e != name && CollisionKey(e) == key {
			clash = append(clash, e)
		}
	}
	if len(clash) == 0 {
		return nil
	}
	slices.Sort(clash)
	return kerr.New(kerr.InvalidTopicException, "topic %q collides with existing %s: '.' and '_' are interchangeable in metric names",
		name, fmt.Sprintf("%q", clash))
}

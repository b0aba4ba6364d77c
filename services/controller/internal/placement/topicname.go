// Package placement holds the controller's pure topic-creation decisions:
// topic name rules, replica assignment (Kafka's rack-aware round robin) and
// the checks on an assignment a client supplies.
package placement

import (
	"fmt"
	"slices"
	"strings"

	"tidemark.io/services/platform/kerr"
)

// MaxTopicNameLength is Kafka's limit: a partition directory is named
// <topic>-<partition> and must fit in 255 bytes (Topic.MAX_NAME_LENGTH).
const MaxTopicNameLength = 249

// ValidateTopicName applies Kafka's topic name rules (Topic.validate): not
// empty, not "." or "..", at most 249 characters, only ASCII letters, digits,
// '.', '_' and '-'. It returns INVALID_TOPIC_EXCEPTION saying which rule broke.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return kerr.New(kerr.InvalidTopicException, "topic name is empty")
	case name == "." || name == "..":
		return kerr.New(kerr.InvalidTopicException, "topic name cannot be %q", name)
	case len(name) > MaxTopicNameLength:
		return kerr.New(kerr.InvalidTopicException, "topic name is %d characters long; the limit is %d",
			len(name), MaxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !legalTopicChar(name[i]) {
			return kerr.New(kerr.InvalidTopicException,
				"topic name %q has illegal character %q at index %d; only ASCII letters, digits, '.', '_' and '-' are allowed",
				name, string(rune(name[i])), i)
		}
	}
	return nil
}

func legalTopicChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

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

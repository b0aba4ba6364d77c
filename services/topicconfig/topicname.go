package topicconfig

import "tidemark.io/services/platform/kerr"

// MaxTopicNameLength is Kafka's limit: a partition directory is named
// <topic>-<partition> and must fit in 255 bytes (Topic.MAX_NAME_LENGTH).
const MaxTopicNameLength = 249

// ValidateTopicName applies Kafka's topic name rules (Topic.validate): not
// empty, not "." or "..", at most 249 characters, only ASCII letters,
// digits, '.', '_' and '-'. It returns INVALID_TOPIC_EXCEPTION saying which
// rule broke. The controller checks every topic it creates; a broker
// checks a topic a Metadata request names that does not exist.
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

package topicconfig

// OffsetsTopic is the internal topic of consumer groups' committed offsets
// and group metadata. The controller creates it on a broker's request;
// clients may neither produce to it nor create or delete it.
const OffsetsTopic = "__consumer_offsets"

// IsInternal reports whether topic is one of tidemark's internal topics.
func IsInternal(topic string) bool { return topic == OffsetsTopic }

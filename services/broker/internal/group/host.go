package group

import (
	"context"

	"tidemark.io/services/topicconfig"
)

// OffsetsTopic is where groups and their committed offsets live.
const OffsetsTopic = topicconfig.OffsetsTopic

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

// Node is a broker's id and address.
type Node struct {
	ID      int32
	Address string
}

// OffsetSpec selects what ListOffsets looks up.
type OffsetSpec int

// The specs, as BrokerService.ListOffsets.
const (
	Earliest OffsetSpec = iota + 1
	Latest
	AtTimestamp
)

// PartitionOffsets are a partition's offsets as a replica knows them.
type PartitionOffsets struct {
	LogStart      int64
	HighWatermark int64
	LogEnd        int64
}

// Host is what the coordinator needs of its broker: the metadata, the
// replicas of __consumer_offsets it leads, and the same produce path user
// writes take. The broker wires it to its replica manager, metadata cache
// and controller; tests may wire fakes that behave the same.
type Host interface {
	BrokerID() int32
	// Self is this broker's id and advertised address.
	Self() Node
	// Config is the effective broker configuration (group.* and
	// offsets.* settings).
	Config() topicconfig.BrokerConfig
	// PartitionCount is a topic's partition count in the metadata, 0 when
	// the topic is not known.
	PartitionCount(topic string) int32
	// TopicID is a topic's id in the metadata ("" when the topic does not
	// exist); ok is false while this broker has no metadata yet.
	TopicID(topic string) (id string, ok bool)
	// PartitionLeader is a partition's leader in the metadata; false when
	// it has none.
	PartitionLeader(tp TP) (Node, bool)
	// CreateOffsetsTopic asks the active controller to create
	// __consumer_offsets (a no-op when it exists).
	CreateOffsetsTopic(ctx context.Context) error
	// Leads reports whether this broker leads tp, and the leader epoch in
	// which it became the leader: an epoch bump that leaves the same
	// broker leading (an ISR change) does not change it, so the groups
	// are not reloaded for it (as Kafka calls onElection only for a new
	// leadership).
	Leads(tp TP) (since int32, ok bool)
	// LocalOffsets are a hosted replica's offsets; false when not hosted.
	LocalOffsets(tp TP) (PartitionOffsets, bool)
	// Read returns the batches of a hosted replica from offset, below
	// upTo, and the offset to read next.
	Read(tp TP, offset, upTo int64) (batches []byte, next int64, err error)
	// Append writes one batch as leader with acks=all and answers once
	// the high watermark covers it; the offset is the batch's last. It
	// refuses (NOT_LEADER_OR_FOLLOWER), writing nothing, unless this
	// broker leads tp in the leadership that began in epoch since (as
	// Leads reports it): a coordinator's state is its leadership's.
	Append(ctx context.Context, tp TP, since int32, batch []byte) (lastOffset int64, err error)
	// ListOffsets asks tp's leader (this broker or another) for its
	// earliest or latest offset, or the first at a timestamp; with the
	// log end offset when the leader reports it (-1 otherwise).
	ListOffsets(ctx context.Context, tp TP, spec OffsetSpec, ts int64) (offset int64, err error)
}

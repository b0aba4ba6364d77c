package client

import (
	"context"
	"slices"
	"time"
	"unicode/utf8"

	"tidemark.io/services/client/assign"
	"tidemark.io/services/platform/kerr"
)

// Group consumer defaults, Kafka's.
const (
	// DefaultSessionTimeout is session.timeout.ms.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultRebalanceTimeout is max.poll.interval.ms, which Kafka's
	// consumer sends as the rebalance timeout.
	DefaultRebalanceTimeout = 5 * time.Minute
	// DefaultHeartbeatInterval is heartbeat.interval.ms.
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultAutoCommitInterval is auto.commit.interval.ms.
	DefaultAutoCommitInterval = 5 * time.Second
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// RebalanceCallback is told about partitions that change hands. It runs on
// the goroutine that called Poll (or Close), so every record an earlier
// Poll returned has been handled by then; it may call CommitSync and
// CommitAsync but not Poll or Close.
type RebalanceCallback func(ctx context.Context, partitions []TopicPartition)

// GroupOptions configures a GroupConsumer. The names in the comments are
// Kafka's consumer configs.
type GroupOptions struct {
	// GroupID is group.id.
	GroupID string
	// Topics are the topics to subscribe to.
	Topics []string
	// InstanceID is group.instance.id: set, the member is static
	// (KIP-345) and may restart within the session timeout without a
	// rebalance; a second member with the same id fences the first
	// (FENCED_INSTANCE_ID, fatal to it).
	InstanceID string
	// ClientID is client.id, shown by groups describe.
	ClientID string

	// SessionTimeout is session.timeout.ms: how long the coordinator keeps
	// a member that sends no heartbeat.
	SessionTimeout time.Duration
	// RebalanceTimeout is max.poll.interval.ms: how long a rebalance waits
	// for members to rejoin, and the longest a member may go without
	// calling Poll: past it, the member leaves the group (its partitions
	// go to the others) and joins again at its next Poll, as Kafka's
	// consumer does when its poll timeout expires.
	RebalanceTimeout time.Duration
	// HeartbeatInterval is heartbeat.interval.ms.
	HeartbeatInterval time.Duration

	// AutoOffsetReset is auto.offset.reset: where a partition without a
	// committed offset starts, "earliest", "latest" (the default) or
	// "none" (Poll returns an error).
	AutoOffsetReset string
	// DisableAutoCommit is enable.auto.commit=false: positions are
	// committed only by CommitSync and CommitAsync.
	DisableAutoCommit bool
	// AutoCommitInterval is auto.commit.interval.ms. An auto-commit due
	// while the last one is still in flight is left to a later Poll.
	AutoCommitInterval time.Duration

	// Assignors is partition.assignment.strategy, most preferred first
	// (default range, then cooperative-sticky, as Kafka). The group uses
	// the cooperative protocol only when every assignor is cooperative.
	Assignors []assign.Assignor

	OnPartitionsAssigned RebalanceCallback
	// OnPartitionsRevoked is called before partitions are given up in a
	// rebalance or on Close, after the auto-commit of their positions.
	OnPartitionsRevoked RebalanceCallback
	// OnPartitionsLost is called when the member learns it was no longer
	// in the group (its session expired, it was fenced): the partitions
	// may already be another member's, so nothing is committed.
	OnPartitionsLost RebalanceCallback

	// Fetching, as in ConsumerOptions.
	MaxBytes       int32
	MaxWait        time.Duration
	MinBytes       int32
	Rack           string
	RequestTimeout time.Duration
}

func (o GroupOptions) resolve(c *Client) (GroupOptions, ResetPolicy, error) {
	if o.GroupID == "" {
		return o, 0, kerr.BadField(kerr.InvalidGroupID, "group.id", "no group id given")
	}
	topics := slices.Clone(o.Topics)
	slices.Sort(topics)
	o.Topics = slices.Compact(topics)
	if len(o.Topics) == 0 || o.Topics[0] == "" {
		return o, 0, kerr.BadField(kerr.InvalidConfig, "topics", "no topic to subscribe to")
	}
	if err := o.checkUTF8(); err != nil {
		return o, 0, err
	}
	var reset ResetPolicy
	switch o.AutoOffsetReset {
	case "", "latest":
		reset = ResetLatest
	case "earliest":
		reset = ResetEarliest
	case "none":
		reset = ResetNone
	default:
		return o, 0, kerr.BadField(kerr.InvalidConfig, "auto.offset.reset", "%q is not earliest, latest or none", o.AutoOffsetReset)
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.RebalanceTimeout <= 0 {
		o.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = min(DefaultHeartbeatInterval, o.SessionTimeout/3)
	}
	if o.HeartbeatInterval >= o.SessionTimeout {
		return o, 0, kerr.BadField(kerr.InvalidConfig, "heartbeat.interval.ms", "%v must be less than session.timeout.ms %v", o.HeartbeatInterval, o.SessionTimeout)
	}
	if o.AutoCommitInterval <= 0 {
		o.AutoCommitInterval = DefaultAutoCommitInterval
	}
	if len(o.Assignors) == 0 {
		o.Assignors = []assign.Assignor{assign.Range{}, assign.CooperativeSticky{}}
	}
	seen := map[string]bool{}
	for _, a := range o.Assignors {
		if a == nil || a.Name() == "" || seen[a.Name()] {
			return o, 0, kerr.BadField(kerr.InvalidConfig, "partition.assignment.strategy", "assignors must be named, once each")
		}
		seen[a.Name()] = true
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultFetchMaxWait
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = c.opts.RequestTimeout
	}
	return o, reset, nil
}

// checkUTF8 refuses names no request can carry (proto strings are UTF-8):
// the consumer would join and fetch in the background for ever, every
// request failing to marshal, and Poll would say nothing.
func (o GroupOptions) checkUTF8() error {
	if !utf8.ValidString(o.GroupID) {
		return kerr.BadField(kerr.InvalidGroupID, "group.id", "%q is not UTF-8", o.GroupID)
	}
	for _, f := range []struct{ name, value string }{
		{"group.instance.id", o.InstanceID}, {"client.id", o.ClientID}, {"client.rack", o.Rack},
	} {
		if !utf8.ValidString(f.value) {
			return kerr.BadField(kerr.InvalidConfig, f.name, "%q is not UTF-8", f.value)
		}
	}
	for _, t := range o.Topics {
		if !utf8.ValidString(t) {
			return kerr.BadField(kerr.InvalidConfig, "topics", "%q is not UTF-8", t)
		}
	}
	return nil
}

// rebalanceProtocol is the protocol every assignor supports: cooperative
// only when all are (Kafka's rule, so a group can move from eager to
// cooperative one rolling restart at a time).
func (o GroupOptions) rebalanceProtocol() assign.RebalanceProtocol {
	for _, a := range o.Assignors {
		if a.Protocol() != assign.Cooperative {
			return assign.Eager
		}
	}
	return assign.Cooperative
}

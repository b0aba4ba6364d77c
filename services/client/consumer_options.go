package client

import (
	"time"

	"tidemark.io/services/platform/kerr"
)

// ResetPolicy is auto.offset.reset: what a consumer does when its position
// is outside the log (OFFSET_OUT_OF_RANGE).
type ResetPolicy int8

const (
	// ResetNone returns the OFFSET_OUT_OF_RANGE error from Poll.
	ResetNone ResetPolicy = iota
	// ResetEarliest moves to the log start offset.
	ResetEarliest
	// ResetLatest moves to the high watermark.
	ResetLatest
)

// Consumer defaults, Kafka's.
const (
	// DefaultFetchMaxBytes is max.partition.fetch.bytes.
	DefaultFetchMaxBytes = 1 << 20
	// DefaultFetchMaxWait is fetch.max.wait.ms.
	DefaultFetchMaxWait = 500 * time.Millisecond
)

// ConsumerOptions configures a Consumer of one partition.
type ConsumerOptions struct {
	Topic     string
	Partition int32
	// StartOffset is where to start: an offset, OffsetEarliest or
	// OffsetLatest. The zero value starts at offset 0.
	StartOffset int64
	// StartLeaderEpoch, when set (not nil, not negative), is the leader
	// epoch of the record before StartOffset as it was read (a group's
	// committed leader epoch). The first fetch names it, so that a log
	// truncated under StartOffset since is found (KIP-320) as it is under
	// a running consumer (LogTruncation). Only with an offset.
	StartLeaderEpoch *int32
	// MaxBytes caps the record bytes of one fetch (the first batch comes
	// whole even when larger, KIP-74).
	MaxBytes int32
	// MaxWait is how long the broker may wait for MinBytes to be readable.
	MaxWait  time.Duration
	MinBytes int32
	// Rack is client.rack: when set, the leader may name a replica in the
	// same rack to fetch from (KIP-392).
	Rack  string
	Reset ResetPolicy
	// RequestTimeout bounds one fetch beyond MaxWait; 0 uses the client's.
	RequestTimeout time.Duration
}

func (o ConsumerOptions) resolve(c *Client) (ConsumerOptions, error) {
	if o.Topic == "" {
		return o, kerr.BadField(kerr.InvalidConfig, "topic", "no topic given")
	}
	if o.Partition < 0 {
		return o, kerr.BadField(kerr.InvalidConfig, "partition", "must not be negative, got %d", o.Partition)
	}
	if o.StartOffset < OffsetEarliest {
		return o, kerr.BadField(kerr.InvalidConfig, "start.offset", "%d is neither an offset nor OffsetEarliest/OffsetLatest", o.StartOffset)
	}
	if o.StartLeaderEpoch != nil && *o.StartLeaderEpoch >= 0 && o.StartOffset < 0 {
		return o, kerr.BadField(kerr.InvalidConfig, "start.leader.epoch", "given with OffsetEarliest/OffsetLatest, which have no epoch")
	}
	if o.Reset < ResetNone || o.Reset > ResetLatest {
		return o, kerr.BadField(kerr.InvalidConfig, "auto.offset.reset", "unknown value %d", o.Reset)
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultFetchMaxBytes
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultFetchMaxWait
	}
	if o.MinBytes <= 0 {
		o.MinBytes = 1
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = c.opts.RequestTimeout
	}
	return o, nil
}

// startEpoch is the leader epoch the position starts with: -1 for none.
func (o ConsumerOptions) startEpoch() int32 {
	if o.StartLeaderEpoch == nil || *o.StartLeaderEpoch < 0 {
		return -1
	}
	return *o.StartLeaderEpoch
}

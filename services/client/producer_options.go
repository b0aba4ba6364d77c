package client

import (
	"math"
	"time"

	"tidemark.io/services/platform/kerr"
)

// Acks says when a produce request is answered (acks). The zero value is
// AcksAll, Kafka's default since 3.0.
type Acks int8

const (
	// AcksAll (acks=all, -1): once every in-sync replica has the batch, i.e.
	// the high watermark covers it. With min.insync.replicas this is the
	// setting that does not lose acknowledged records.
	AcksAll Acks = iota
	// AcksLeader (acks=1): after the leader's own append.
	AcksLeader
	// AcksNone (acks=0): at once; offsets are unknown.
	AcksNone
)

// wire is the value ProduceRequest.acks carries.
func (a Acks) wire() int32 {
	switch a {
	case AcksLeader:
		return 1
	case AcksNone:
		return 0
	}
	return -1
}

// String is the acks setting as Kafka spells it.
func (a Acks) String() string {
	switch a {
	case AcksLeader:
		return "1"
	case AcksNone:
		return "0"
	}
	return "all"
}

// Idempotence is enable.idempotence.
type Idempotence int8

const (
	// IdempotenceDefault is on unless acks or the in-flight limit rule it
	// out, in which case it is quietly off: Kafka's behaviour when
	// enable.idempotence is not set.
	IdempotenceDefault Idempotence = iota
	// IdempotenceOn is enable.idempotence=true set explicitly: acks other
	// than all, or more than 5 requests in flight, is a config error.
	IdempotenceOn
	// IdempotenceOff is enable.idempotence=false.
	IdempotenceOff
)

// Producer defaults. Kafka's, except where noted.
const (
	// DefaultLinger is linger.ms. Kafka 4.0 raised it from 0 to 5 ms
	// (KIP-1030): a few milliseconds of waiting fills batches much better
	// under load and costs little latency; tidemark follows.
	DefaultLinger = 5 * time.Millisecond
	// DefaultBatchSize is batch.size in bytes: 64 KiB, four times Kafka's
	// 16 KiB. An idempotent producer has at most 5 batches of a partition
	// in flight, so batch.size bounds what one partition can move per
	// replication round trip; measured on the dev cluster (one partition,
	// RF 3, acks=all), a batching producer went from 28k to 46k 1 KiB
	// records/s and from 168k to 234k 128 B records/s. A batch only fills
	// under load (linger.ms sends it otherwise), and one the leader refuses
	// as too large (a topic's max.message.bytes below batch.size) is split.
	DefaultBatchSize = 65536
	// DefaultMaxInFlight is max.in.flight.requests.per.connection; here it is
	// per partition, which is what ordering and duplicate detection need.
	DefaultMaxInFlight = 5
	// MaxIdempotentInFlight is the most batches a broker remembers per
	// producer for duplicate detection.
	MaxIdempotentInFlight = 5
	// DefaultDeliveryTimeout is delivery.timeout.ms: the bound on a record's
	// whole life in the producer, retries included.
	DefaultDeliveryTimeout = 120 * time.Second
	// DefaultBufferMemory is buffer.memory: bytes of records waiting to be
	// acknowledged before ProduceAsync blocks.
	DefaultBufferMemory = 32 << 20
	// DefaultMaxBlock is max.block.ms: how long ProduceAsync may block for
	// metadata or buffer space.
	DefaultMaxBlock = 60 * time.Second
)

// ProducerOptions configures a Producer. Zero values pick the defaults.
type ProducerOptions struct {
	Acks        Acks
	Idempotence Idempotence
	// Linger (linger.ms) is how long a batch waits for more records before
	// it is sent. 0 means DefaultLinger; a negative value sends at once.
	Linger time.Duration
	// BatchSize (batch.size) caps a batch in bytes; a single larger record
	// still goes, alone in its batch.
	BatchSize int
	// MaxInFlight (max.in.flight.requests.per.connection) caps the produce
	// requests outstanding per partition. 0 means DefaultMaxInFlight with
	// idempotence, 1 without (see the package documentation).
	MaxInFlight int
	// DeliveryTimeout (delivery.timeout.ms) bounds the time from ProduceAsync
	// to the callback; it must be at least Linger + RequestTimeout.
	DeliveryTimeout time.Duration
	// RequestTimeout (request.timeout.ms) bounds one produce attempt; 0 uses
	// the client's.
	RequestTimeout time.Duration
	// Retries caps the retries of one batch; 0 means unlimited (Kafka's
	// MaxInt), so that DeliveryTimeout is the bound. Negative disables retries.
	Retries int
	// BufferMemory (buffer.memory) bounds the bytes of unacknowledged records.
	// While a record waits for room, open batches are sent without waiting
	// out Linger.
	BufferMemory int
	// MaxBlock (max.block.ms) bounds how long ProduceAsync blocks.
	MaxBlock time.Duration
}

// resolve applies the defaults and checks the combination, returning
// INVALID_CONFIG naming the offending option, and whether idempotence is on.
func (o ProducerOptions) resolve(c *Client) (ProducerOptions, bool, error) {
	switch {
	case o.Linger == 0:
		o.Linger = DefaultLinger
	case o.Linger < 0:
		o.Linger = 0
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	inFlightSet := o.MaxInFlight > 0
	if !inFlightSet {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = c.opts.RequestTimeout
	}
	deliverySet := o.DeliveryTimeout > 0
	if !deliverySet {
		o.DeliveryTimeout = max(DefaultDeliveryTimeout, o.Linger+o.RequestTimeout)
	}
	switch {
	case o.Retries == 0:
		o.Retries = math.MaxInt32
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.BufferMemory <= 0 {
		o.BufferMemory = DefaultBufferMemory
	}
	if o.MaxBlock <= 0 {
		o.MaxBlock = DefaultMaxBlock
	}
	if o.Acks < AcksAll || o.Acks > AcksNone {
		return o, false, kerr.BadField(kerr.InvalidConfig, "acks", "unknown value %d", o.Acks)
	}
	if deliverySet && o.DeliveryTimeout < o.Linger+o.RequestTimeout {
		return o, false, kerr.BadField(kerr.InvalidConfig, "delivery.timeout.ms",
			"%v must be at least linger.ms + request.timeout.ms = %v", o.DeliveryTimeout, o.Linger+o.RequestTimeout)
	}
	idem := o.Idempotence != IdempotenceOff
	if idem && o.Acks != AcksAll {
		if o.Idempotence == IdempotenceOn {
			return o, false, kerr.BadField(kerr.InvalidConfig, "acks",
				"must be all to use the idempotent producer (enable.idempotence=true), got %v", o.Acks)
		}
		idem = false
	}
	if idem && o.MaxInFlight > MaxIdempotentInFlight {
		if o.Idempotence == IdempotenceOn {
			return o, false, kerr.BadField(kerr.InvalidConfig, "max.in.flight.requests.per.connection",
				"must be at most %d to use the idempotent producer (enable.idempotence=true), got %d", MaxIdempotentInFlight, o.MaxInFlight)
		}
		idem = false
	}
	if !idem && !inFlightSet {
		// Concurrent gRPC calls are handled in no particular order; without
		// sequence numbers only one request at a time keeps records in order.
		o.MaxInFlight = 1
	}
	return o, idem, nil
}

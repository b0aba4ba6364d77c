package client

import (
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// Header is a record header.
type Header = recordbatch.Header

// Record is one record, as handed to a Producer and as returned by a Consumer.
type Record struct {
	Topic string
	// Partition is where the record was read from, or, for a Producer, where
	// to write it when ManualPartition is set. Otherwise the producer chooses
	// the partition from the key (see Producer).
	Partition       int32
	ManualPartition bool

	Key     []byte
	Value   []byte
	Headers []Header
	// Timestamp is the create time; the zero time means "now" on produce.
	Timestamp time.Time

	// Offset and LeaderEpoch are set on consumed records.
	Offset      int64
	LeaderEpoch int32
}

// Result is the outcome of producing one record.
type Result struct {
	Topic     string
	Partition int32 // -1 when no partition could be chosen
	// Offset is -1 when unknown: on failure, or with acks=0.
	Offset int64
	// Timestamp is the record's create time.
	Timestamp time.Time
	// LeaderEpoch is the epoch of the leader that wrote it (-1 when unknown).
	LeaderEpoch int32
	// Code is kerr.None on success, else the code of the error passed beside it.
	Code kerr.Code
}

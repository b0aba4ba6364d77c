package client

import (
	"encoding/binary"
	"fmt"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// pending is one record waiting for its outcome.
type pending struct {
	ts   time.Time
	cb   func(Result, error)
	size int // bytes charged to buffer.memory
}

// batch is the records of one partition sent together in one request. The
// records are encoded as they arrive; the header (producer id, epoch, base
// sequence, CRC) is written when the batch is sequenced, and rewritten if
// the producer epoch is bumped.
type batch struct {
	b        recordbatch.Builder
	recs     []pending
	firstTS  int64
	size     int // buffer.memory charge of all records
	created  time.Time
	deadline time.Time     // created + delivery.timeout.ms
	done     chan struct{} // closed when every record has its callback

	// The fields below belong to the partition's state (partitionProducer.mu).
	data         []byte // the built batch, once sequenced
	sequenced    bool
	baseSeq      int32
	inFlight     bool
	sends        int      // requests made under the current sequence
	result       *attempt // the last attempt's outcome, not yet acted upon
	retryAt      time.Time
	retries      int  // retries after real failures (not reorderings)
	sentWithGap  bool // the current attempt went out while an earlier batch was unacknowledged
	maybeWritten bool // some attempt ended without telling whether the batch was appended
	expired      bool
	lastErr      *kerr.Error
	slotWait     bool // was ready while every request slot was taken (ProducerStats.SlotWaits)
	counted      bool // its first send is in ProducerStats
}

// attempt is the outcome of one produce request.
type attempt struct {
	resp *brokerv1.ProduceResponse
	err  *kerr.Error
	sent bool // the request reached the wire (not a metadata failure before it)
}

func newBatch(now time.Time, deliveryTimeout time.Duration) *batch {
	return &batch{created: now, deadline: now.Add(deliveryTimeout), done: make(chan struct{})}
}

// fits reports whether r can join the batch without passing limit bytes.
// An empty batch takes any record.
func (bt *batch) fits(r *recordbatch.Record, limit int) bool {
	if len(bt.recs) == 0 {
		return true
	}
	return bt.b.Len()+recordSize(int32(len(bt.recs)), r.Timestamp-bt.firstTS, r) <= limit
}

func (bt *batch) add(r *recordbatch.Record, p pending) {
	if len(bt.recs) == 0 {
		bt.firstTS = r.Timestamp
	}
	bt.b.Append(*r)
	bt.recs = append(bt.recs, p)
	bt.size += p.size
}

// build writes the header for the given identity and sequence.
func (bt *batch) build(pid int64, epoch int16, seq int32) {
	bt.data = bt.b.Build(pid, epoch, seq)
	bt.baseSeq = seq
	bt.sequenced = true
}

// splittable says whether a refusal as too large can be answered by
// sending the batch's records in two smaller batches, as Kafka's producer
// does (KAFKA-3995): the leader's max.message.bytes may be below batch.size.
// A single record that is too large fails.
func (bt *batch) splittable(err *kerr.Error) bool {
	return err != nil && (err.Code == kerr.MessageTooLarge || err.Code == kerr.RecordListTooLarge) &&
		len(bt.recs) > 1 && !bt.maybeWritten
}

// split divides the batch's records into two unsequenced batches, in order,
// each keeping the batch's creation time and delivery deadline. The second
// half takes over the batch's done channel: it completes after the first, so
// whoever waits for the batch waits for both.
func (bt *batch) split() (*batch, *batch) {
	half := len(bt.recs) / 2
	first := &batch{created: bt.created, deadline: bt.deadline, done: make(chan struct{})}
	second := &batch{created: bt.created, deadline: bt.deadline, done: bt.done}
	i := 0
	for r, err := range bt.b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence).Records() {
		if err != nil {
			// The client encoded these bytes itself; a failure is a bug.
			panic(fmt.Sprintf("client: re-reading a batch it built: %v", err))
		}
		into := first
		if i >= half {
			into = second
		}
		into.add(&r, bt.recs[i])
		i++
	}
	return first, second
}

// recordSize is the encoded size of r as record number offsetDelta of a
// batch, matching recordbatch.Builder's encoding.
func recordSize(offsetDelta int32, tsDelta int64, r *recordbatch.Record) int {
	body := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		body += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return varintLen(int64(body)) + body
}

func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

func bytesLen(p []byte) int {
	if p == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(p))) + len(p)
}

// memSize is what a record is charged against buffer.memory: its payload
// plus a fixed overhead for the bookkeeping around it.
func memSize(r *Record) int {
	n := 64 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

package grpcapi

import (
	"google.golang.org/protobuf/encoding/protowire"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// Field numbers of ProduceRequest and Records read before decoding.
const (
	produceTopic       = 1
	producePartition   = 2
	produceRecordBatch = 5
	produceRecords     = 6
	recordsRecord      = 1
)

// Admit judges a request from its encoded bytes, before the server decodes
// it (grpcserver.Admit). A ProduceRequest's structured records decode into
// an object each, so a few megabytes of empty records would become gigabytes
// of memory: the records are counted, and their encoded size compared with
// max.message.bytes, here. Batch payloads are counted from their headers.
func (b *Broker) Admit(wire []byte, msg any) error {
	if _, ok := msg.(*brokerv1.ProduceRequest); !ok {
		return nil
	}
	var topic string
	partition := int32(0)
	var batch, records []byte
	haveRecords := false
	for p := wire; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return nil // malformed: the decoder says so
		}
		p = p[n:]
		switch {
		case num == produceTopic && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(p)
			if m < 0 {
				return nil
			}
			topic, p = string(v), p[m:]
			continue
		case num == producePartition && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(p)
			if m < 0 {
				return nil
			}
			partition, p = int32(v), p[m:]
			continue
		case num == produceRecordBatch && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(p)
			if m < 0 {
				return nil
			}
			batch, records, haveRecords, p = v, nil, false, p[m:] // the last oneof member wins
			continue
		case num == produceRecords && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(p)
			if m < 0 {
				return nil
			}
			batch, records, haveRecords, p = nil, v, true, p[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, p)
		if m < 0 {
			return nil
		}
		p = p[m:]
	}
	maxRecords := int64(b.RM.BrokerConfig().ProduceMaxRecordsPerRequest)
	if !haveRecords {
		if n := recordbatch.ClaimedRecords(batch); n > maxRecords {
			return kerr.BadField(kerr.RecordListTooLarge, "record_batch",
				"the batch headers claim %d records; produce.max.records.per.request is %d", n, maxRecords)
		}
		return nil
	}
	n, ok := countField(records, recordsRecord, maxRecords)
	if !ok {
		return nil
	}
	if n > maxRecords {
		return kerr.BadField(kerr.RecordListTooLarge, "records",
			"the request holds more than %d records; produce.max.records.per.request is %d", maxRecords, maxRecords)
	}
	if r, hosted := b.RM.Replica(replica.TP{Topic: topic, Partition: partition}); hosted {
		if limit := r.Log().Config().MaxMessageBytes; len(records) > limit {
			return kerr.BadField(kerr.MessageTooLarge, "records",
				"the structured records take %d bytes encoded; max.message.bytes of %s is %d", len(records), topic, limit)
		}
	}
	return nil
}

// countField counts the occurrences of field num in an encoded message,
// stopping once past limit; ok is false when p is malformed.
func countField(p []byte, num protowire.Number, limit int64) (n int64, ok bool) {
	for len(p) > 0 && n <= limit {
		got, typ, k := protowire.ConsumeTag(p)
		if k < 0 {
			return n, false
		}
		p = p[k:]
		m := protowire.ConsumeFieldValue(got, typ, p)
		if m < 0 {
			return n, false
		}
		p = p[m:]
		if got == num {
			n++
		}
	}
	return n, true
}

// checkTimeout bounds a request's timeout_ms by request.timeout.max.ms.
func (b *Broker) checkTimeout(ms int32) error {
	if ms < 0 {
		return kerr.BadField(kerr.InvalidRequest, "timeout_ms", "must not be negative, got %d", ms)
	}
	if limit := b.RM.BrokerConfig().RequestTimeoutMaxMs; ms > limit {
		return kerr.BadField(kerr.InvalidRequest, "timeout_ms", "%d is above request.timeout.max.ms %d", ms, limit)
	}
	return nil
}

// fetchMaxBytes caps a consumer's max_bytes at fetch.max.bytes before any
// buffer is sized by it, as Kafka does (the smaller of the two applies).
func (b *Broker) fetchMaxBytes(asked int32) int {
	limit := b.RM.BrokerConfig().FetchMaxBytes
	if asked <= 0 {
		return min(replica.DefaultFetchMaxBytes, int(limit))
	}
	return int(min(asked, limit))
}

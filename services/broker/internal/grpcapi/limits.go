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
	recordHeaders      = 5
)

// Admit judges a request from its encoded bytes, before the server decodes
// it (grpcserver.Admit). A ProduceRequest's structured records decode into
// an object each, so a few megabytes of empty records would become gigabytes
// of memory: the records are counted, and their encoded size compared with
// max.message.bytes, here. Batch payloads are counted from their headers.
func (b *Broker) Admit(wire []byte, msg any) error {
	switch msg.(type) {
	case *brokerv1.ProduceRequest:
	case *brokerv1.ProduceStreamRequest:
		return admitStreamed(wire)
	default:
		return nil
	}
	var topic string
	partition := int32(0)
	var batch []byte
	// A message field given several times is merged by the decoder, so the
	// structured records of every occurrence count together.
	var records, headers, recordBytes int64
	structured := false
	for p := wire; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return nil // malformed: the decoder says so
		}
		p = p[n:]
		if typ == protowire.BytesType && (num == produceTopic || num == produceRecordBatch || num == produceRecords) {
			v, m := protowire.ConsumeBytes(p)
			if m < 0 {
				return nil
			}
			p = p[m:]
			switch num {
			case produceTopic:
				topic = string(v)
			case produceRecordBatch:
				batch, structured = v, false // the last oneof member wins
			case produceRecords:
				r, h, ok := countRecords(v)
				if !ok {
					return nil
				}
				records, headers, recordBytes, structured = records+r, headers+h, recordBytes+int64(len(v)), true
			}
			continue
		}
		if num == producePartition && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(p)
			if m < 0 {
				return nil
			}
			partition, p = int32(v), p[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, p)
		if m < 0 {
			return nil
		}
		p = p[m:]
	}
	maxRecords := int64(b.RM.BrokerConfig().ProduceMaxRecordsPerRequest)
	if !structured {
		return b.CheckBatchClaims(batch)
	}
	if records > maxRecords {
		return kerr.BadField(kerr.RecordListTooLarge, "records",
			"the request holds %d records; produce.max.records.per.request is %d", records, maxRecords)
	}
	if headers > maxRecords {
		return kerr.BadField(kerr.RecordListTooLarge, "records",
			"the request holds %d record headers; produce.max.records.per.request is %d", headers, maxRecords)
	}
	if r, hosted := b.RM.Replica(replica.TP{Topic: topic, Partition: partition}); hosted {
		if limit := r.Log().Config().MaxMessageBytes; recordBytes > int64(limit) {
			return kerr.BadField(kerr.MessageTooLarge, "records",
				"the structured records take %d bytes encoded; max.message.bytes of %s is %d", recordBytes, topic, limit)
		}
	}
	return nil
}

// CheckBatchClaims refuses a record batch whose headers claim more records
// than produce.max.records.per.request: every produce door asks it (the
// unary call through Admit, the stream, the Kafka listener per partition).
func (b *Broker) CheckBatchClaims(batch []byte) error {
	maxRecords := int64(b.RM.BrokerConfig().ProduceMaxRecordsPerRequest)
	if n := recordbatch.ClaimedRecords(batch); n > maxRecords {
		return kerr.BadField(kerr.RecordListTooLarge, "record_batch",
			"the batch headers claim %d records; produce.max.records.per.request is %d", n, maxRecords)
	}
	return nil
}

// Field numbers of ProduceStreamRequest read before decoding.
const streamRequest = 2

// admitStreamed refuses, before decoding, a produce stream message whose
// request holds structured records: they would decode into an object each,
// and the stream carries encoded batches only (the handler answers a batch's
// own limits on the message, so they do not end the stream).
func admitStreamed(wire []byte) error {
	for p := wire; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return nil // malformed: the decoder says so
		}
		p = p[n:]
		if num == streamRequest && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(p)
			if m < 0 {
				return nil
			}
			p = p[m:]
			if n, ok := countField(v, produceRecords); !ok || n > 0 {
				return kerr.BadField(kerr.InvalidRequest, "request.records",
					"a produce stream carries record_batch payloads only; send structured records with Produce")
			}
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, p)
		if m < 0 {
			return nil
		}
		p = p[m:]
	}
	return nil
}

// countRecords counts the records of an encoded Records message and the
// headers they carry (each decodes into an object of its own); ok is false
// when p is malformed.
func countRecords(p []byte) (records, headers int64, ok bool) {
	for len(p) > 0 {
		num, typ, k := protowire.ConsumeTag(p)
		if k < 0 {
			return 0, 0, false
		}
		p = p[k:]
		if num == recordsRecord && typ == protowire.BytesType {
			rec, m := protowire.ConsumeBytes(p)
			if m < 0 {
				return 0, 0, false
			}
			p = p[m:]
			records++
			h, ok := countField(rec, recordHeaders)
			if !ok {
				return 0, 0, false
			}
			headers += h
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, p)
		if m < 0 {
			return 0, 0, false
		}
		p = p[m:]
	}
	return records, headers, true
}

// countField counts the occurrences of field num in an encoded message; ok
// is false when p is malformed.
func countField(p []byte, num protowire.Number) (n int64, ok bool) {
	for len(p) > 0 {
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

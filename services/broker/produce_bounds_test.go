package broker_test

import (
	"context"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// record_batch is "one record batch" (broker.proto), as Kafka's Produce v3+
// takes exactly one per partition (INVALID_RECORD otherwise). Two
// concatenated batches are appended instead.
func TestProduceTakesOneBatch(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("one", 1, 1, nil)
	two := append(append([]byte{}, batchOf("a")...), batchOf("b")...)
	resp, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "one", Acks: 1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: two}})
	if codeOf(err) != kerr.InvalidRecord {
		t.Fatalf("two batches in record_batch: %v, %v (log end offset %d); want INVALID_RECORD", resp, err, c.leo("one"))
	}
}

// produce.max.records.per.request counts the headers of structured records
// ("N record headers") because each decodes into an object; a batch's
// record headers are not counted at all, so one small compressed batch
// carries millions of them, and every structured read of it decodes them.
func TestBatchRecordHeadersCountAgainstTheLimit(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"produce.max.records.per.request": "1000"})
	c.ctrl.createTopic("h", 1, 1, nil)

	// The structured door refuses 1001 headers on one record.
	hdrs := make([]*commonv1.RecordHeader, 1001)
	for i := range hdrs {
		hdrs[i] = &commonv1.RecordHeader{}
	}
	_, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "h", Acks: 1,
		Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: []*commonv1.Record{{Headers: hdrs}}}}})
	if codeOf(err) != kerr.RecordListTooLarge {
		t.Fatalf("structured record with 1001 headers: %v, want RECORD_LIST_TOO_LARGE", err)
	}

	// The batch door: one record with a million empty headers, zstd.
	var bl recordbatch.Builder
	bl.Append(recordbatch.Record{Timestamp: 1, Value: []byte("v"), Headers: make([]recordbatch.Header, 1_000_000)})
	batch, err := bl.Build(-1, -1, -1).Compressed(recordbatch.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "h", Acks: 1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batch}})
	if codeOf(err) == kerr.RecordListTooLarge {
		return
	}
	var fetched int
	used := heapDuring(func() {
		resp, ferr := c.client(1).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "h", MaxBytes: 1 << 20})
		if ferr == nil && len(resp.GetRecords()) > 0 {
			fetched = len(resp.GetRecords()[0].GetHeaders())
		}
	})
	t.Fatalf("a %d-byte batch with 1000000 record headers: %v (want RECORD_LIST_TOO_LARGE); a structured fetch of it returned %d headers and allocated %d MB",
		len(batch), err, fetched, used>>20)
}

func codeOf(err error) kerr.Code {
	if e := kerr.FromStatus(err); e != nil {
		return e.Code
	}
	return kerr.None
}

// A compressed batch is decompressed once on produce: the log's validation
// also counts the record headers produce.max.records.per.request bounds
// (and the minimum timestamp and the keys, for the log's own checks), so
// nothing walks the records again. Each decompression of this 1 KiB batch
// allocates 32 MiB.
func TestACompressedProduceIsDecompressedOnce(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("z", 1, 1, map[string]string{"cleanup.policy": "compact", "message.timestamp.before.max.ms": "86400000"})
	var bl recordbatch.Builder
	bl.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Key: []byte("k"), Value: make([]byte, 32<<20),
		Headers: []recordbatch.Header{{Key: "h"}}})
	batch, err := bl.Build(-1, -1, -1).Compressed(recordbatch.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	once := heapDuring(func() {
		if err := recordbatch.Validate(batch); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "z", Acks: 1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batch}}); err != nil { // warm up the connection
		t.Fatal(err)
	}
	used := heapDuring(func() {
		if _, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "z", Acks: 1,
			Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batch}}); err != nil {
			t.Fatal(err)
		}
	})
	if used > once+once/2 {
		t.Fatalf("a produce of a %d-byte zstd batch allocated %d MB; one decompression takes %d MB", len(batch), used>>20, once>>20)
	}
}

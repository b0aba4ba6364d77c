package clustertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/recordbatch"
)

// The gRPC front door takes compressed raw batches too: each codec is
// validated, stored as sent, replicated, and decoded for a structured
// (REST-style) fetch.
func TestGRPCProduceTakesCompressedBatches(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	c.CreateTopic("zgrpc", 1, 3, map[string]string{"min.insync.replicas": "2"})
	leader := c.Leader("zgrpc", 0)
	var want []string
	for _, codec := range []recordbatch.Codec{recordbatch.Gzip, recordbatch.Snappy, recordbatch.LZ4, recordbatch.Zstd} {
		var b recordbatch.Builder
		for i := range 3 {
			v := fmt.Sprintf("%s-%d", codec, i)
			want = append(want, v)
			b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
		}
		batch, err := b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence).Compressed(codec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.BrokerClient(leader).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "zgrpc", Partition: 0, Acks: -1,
			TimeoutMs: 10000, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batch}}); err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
	}
	if got := c.SameLogs("zgrpc", 0, 1, 2, 3); !slices.Equal(got, want) {
		t.Fatalf("replicas hold %q, want %q", got, want)
	}
	resp, err := c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "zgrpc", Partition: 0, Offset: 0, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range resp.GetRecords() {
		got = append(got, string(r.GetValue()))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("structured fetch %q, want %q", got, want)
	}
	if codec := StoredCodec(t, c.Broker(leader), "zgrpc"); codec != recordbatch.Gzip {
		t.Fatalf("first stored batch is %s, want gzip as sent", codec)
	}
}

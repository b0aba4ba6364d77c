package broker_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// rawMsg carries request bytes built by hand, so a test can send what no
// well-behaved client would build, without first decoding it itself.
type rawMsg struct{ wire []byte }

// rawCodec sends rawMsg as is and handles everything else as proto.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*rawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(r.wire)}, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// heapDuring reports the bytes the process allocated while fn ran.
func heapDuring(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// wantRefusal checks a call's error is code on field, saying every fragment.
func wantRefusal(t *testing.T, err error, code kerr.Code, field string, says ...string) {
	t.Helper()
	e := kerr.FromStatus(err)
	if e == nil || e.Code != code || e.Field != field {
		t.Fatalf("got %v (%+v), want %v on field %s", err, e, code, field)
	}
	for _, s := range says {
		if !strings.Contains(e.Message, s) {
			t.Fatalf("message %q does not say %q", e.Message, s)
		}
	}
}

func (c *cluster) leo(topic string) int64 {
	c.t.Helper()
	_, leo := c.replicaState(1, topic, 0)
	return leo
}

// produceWire is a ProduceRequest for topic partition 0, acks=1, whose
// payload field (5: record_batch, 6: records) holds payload as given.
func produceWire(topic string, field protowire.Number, payload []byte) []byte {
	var w []byte
	w = protowire.AppendTag(w, 1, protowire.BytesType)
	w = protowire.AppendString(w, topic)
	w = protowire.AppendTag(w, 3, protowire.VarintType)
	w = protowire.AppendVarint(w, 1)
	w = protowire.AppendTag(w, field, protowire.BytesType)
	return protowire.AppendBytes(w, payload)
}

// A million empty structured records take 2 MB on the wire and would take
// well over 100 MB decoded; a batch header can claim a billion records. Both
// are refused from their encoded form, allocating a small fraction of that,
// and the log does not change.
func TestProduceRecordCountIsCheckedBeforeDecoding(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"produce.max.records.per.request": "1000"})
	c.ctrl.createTopic("l", 1, 1, nil)
	if _, err := c.produce("l", 0, 1, "first"); err != nil {
		t.Fatal(err)
	}
	conn := c.conn(1)
	call := func(wire []byte) error {
		return conn.Invoke(context.Background(), brokerv1.BrokerService_Produce_FullMethodName,
			&rawMsg{wire}, &brokerv1.ProduceResponse{}, grpc.ForceCodecV2(rawCodec{}))
	}

	empty := bytes.Repeat([]byte{0x0a, 0x00}, 1_000_000) // Records{records: [{}, {}, ...]}
	wire := produceWire("l", 6, empty)
	var err error
	used := heapDuring(func() { err = call(wire) })
	t.Logf("refusing a million records allocated %d bytes", used)
	if used > 24<<20 {
		t.Fatalf("refusing a million records allocated %d bytes", used)
	}
	wantRefusal(t, err, kerr.RecordListTooLarge, "records", "the request holds 1000000 records; produce.max.records.per.request is 1000")

	// The decoder merges a message field given several times: 1001
	// occurrences of one record each are 1001 records.
	var split []byte
	for range 1001 {
		split = append(split, produceWire("l", 6, []byte{0x0a, 0x00})...)
	}
	wantRefusal(t, call(split), kerr.RecordListTooLarge, "records", "the request holds 1001 records; produce.max.records.per.request is 1000")

	// Headers decode into objects too: one record with a million empty ones.
	oneRecord := protowire.AppendBytes([]byte{0x0a}, bytes.Repeat([]byte{0x2a, 0x00}, 1_000_000))
	if used := heapDuring(func() { err = call(produceWire("l", 6, oneRecord)) }); used > 24<<20 {
		t.Fatalf("refusing a million headers allocated %d bytes", used)
	}
	wantRefusal(t, err, kerr.RecordListTooLarge, "records", "the request holds 1000000 record headers; produce.max.records.per.request is 1000")

	batch := bytes.Clone(batchOf("x"))
	binary.BigEndian.PutUint32(batch[57:], 1<<30) // the header's record count
	wire = produceWire("l", 5, batch)
	if used := heapDuring(func() { err = call(wire) }); used > 4<<20 {
		t.Fatalf("refusing a batch claiming 2^30 records allocated %d bytes", used)
	}
	wantRefusal(t, err, kerr.RecordListTooLarge, "record_batch", "the batch headers claim 1073741824 records; produce.max.records.per.request is 1000")

	if leo := c.leo("l"); leo != 1 {
		t.Fatalf("log end offset %d after refusals, want 1", leo)
	}
	// Within the limit, structured records are served as before.
	resp, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "l", Acks: 1,
		Payload: &brokerv1.ProduceRequest_Records{Records: structured(1000)}})
	if err != nil || resp.GetBaseOffset() != 1 || resp.GetLastOffset() != 1000 {
		t.Fatalf("1000 records: %v, %v", resp, err)
	}
}

func structured(n int) *brokerv1.Records {
	recs := &brokerv1.Records{}
	for range n {
		recs.Records = append(recs.Records, &commonv1.Record{Value: []byte("v")})
	}
	return recs
}

// Structured records larger encoded than the topic's max.message.bytes are
// refused before decoding, naming both sizes.
func TestStructuredRecordsOverMaxMessageBytes(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("m", 1, 1, map[string]string{"max.message.bytes": "1000"})
	if _, err := c.produce("m", 0, 1, "first"); err != nil {
		t.Fatal(err)
	}
	recs := &brokerv1.Records{Records: []*commonv1.Record{{Value: bytes.Repeat([]byte("a"), 800)}, {Value: bytes.Repeat([]byte("b"), 800)}}}
	_, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "m", Acks: 1,
		Payload: &brokerv1.ProduceRequest_Records{Records: recs}})
	wantRefusal(t, err, kerr.MessageTooLarge, "records", "the structured records take 1612 bytes encoded; max.message.bytes of m is 1000")
	if leo := c.leo("m"); leo != 1 {
		t.Fatalf("log end offset %d, want 1", leo)
	}
}

// A fetch asking for 2 GiB gets at most fetch.max.bytes, and the broker
// never sizes a buffer by what was asked.
func TestFetchMaxBytesIsCappedBeforeAllocating(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"fetch.max.bytes": "1048576"})
	c.ctrl.createTopic("f", 1, 1, nil)
	value := strings.Repeat("v", 500_000)
	for range 16 { // 8 MB in the log
		if _, err := c.produce("f", 0, 1, value); err != nil {
			t.Fatal(err)
		}
	}
	var resp *brokerv1.FetchResponse
	var err error
	used := heapDuring(func() {
		resp, err = c.client(1).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "f", Offset: 0, MaxBytes: math.MaxInt32, RawBatches: true},
			grpc.MaxCallRecvMsgSize(64<<20)) // so that only the broker's cap can hold the answer down
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetRecordBatches()); n == 0 || n > 1<<20 {
		t.Fatalf("answer holds %d bytes, want 1..1048576 (fetch.max.bytes)", n)
	}
	t.Logf("allocated %d bytes", used)
	if used > 12<<20 { // the answer is held about four times (read, marshal, receive, decode); uncapped: 8 MB each
		t.Fatalf("a fetch capped at 1 MiB allocated %d bytes", used)
	}
	if resp.GetNextOffset() != 2 {
		t.Fatalf("next offset %d, want 2 (two 500 kB batches fit in 1 MiB)", resp.GetNextOffset())
	}
}

// A follower's fetch asking for 2 GiB is held to the leader's
// replica.fetch.response.max.bytes.
func TestReplicaFetchIsCappedByTheLeader(t *testing.T) {
	c := newCluster(t, 2, map[string]string{"replica.fetch.response.max.bytes": "1048576"})
	c.ctrl.createTopic("r", 1, 2, nil)
	value := strings.Repeat("v", 500_000)
	for range 16 {
		if _, err := c.produce("r", 0, 1, value); err != nil {
			t.Fatal(err)
		}
	}
	c.sameLogs("r", 0, 1, 2) // the real follower is idle from here on
	stream, err := replicationv1.NewReplicationServiceClient(c.conn(1)).ReplicaFetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	var resp *replicationv1.ReplicaFetchResponse
	used := heapDuring(func() {
		err = stream.Send(&replicationv1.ReplicaFetchRequest{ReplicaId: 2, MaxBytes: math.MaxInt32, MaxWaitMs: 0,
			Partitions: []*replicationv1.ReplicaFetchPartition{{Topic: "r", Partition: 0, FetchOffset: 0,
				CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, PartitionMaxBytes: math.MaxInt32}}})
		if err == nil {
			resp, err = stream.Recv()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetPartitions()) != 1 {
		t.Fatalf("answer %v", resp)
	}
	p := resp.GetPartitions()[0]
	if p.GetErrorCode() != 0 {
		t.Fatalf("replica fetch error %v", p.GetErrorCode())
	}
	if n := len(p.GetRecords()); n == 0 || n > 1<<20 {
		t.Fatalf("answer holds %d bytes, want 1..1048576 (replica.fetch.response.max.bytes)", n)
	}
	t.Logf("allocated %d bytes", used)
	if used > 12<<20 { // the answer is held about four times (read, marshal, receive, decode); uncapped: 8 MB each
		t.Fatalf("a replica fetch capped at 1 MiB allocated %d bytes", used)
	}
}

func TestProduceTimeoutIsBounded(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("t", 1, 1, nil)
	for _, tc := range []struct {
		ms   int32
		says string
	}{
		{-1, "must not be negative, got -1"},
		{300_001, "300001 is above request.timeout.max.ms 300000"},
	} {
		_, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "t", Acks: -1, TimeoutMs: tc.ms,
			Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}})
		wantRefusal(t, err, kerr.InvalidRequest, "timeout_ms", tc.says)
	}
	if leo := c.leo("t"); leo != 0 {
		t.Fatalf("log end offset %d, want 0", leo)
	}
}

func TestRecordTimestampsAreBounded(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"log.message.timestamp.after.max.ms": "60000"})
	c.ctrl.createTopic("ts", 1, 1, map[string]string{"message.timestamp.before.max.ms": "3600000"})
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	ahead := time.Now().Add(time.Hour).UnixMilli()
	for _, tc := range []struct {
		ts   int64
		says string
	}{
		{old, "minus message.timestamp.before.max.ms 3600000"},
		{ahead, "plus message.timestamp.after.max.ms 60000"},
	} {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: tc.ts, Value: []byte("x")})
		_, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "ts", Acks: 1,
			Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: b.Build(-1, -1, -1)}})
		e := kerr.FromStatus(err)
		if e == nil || e.Code != kerr.InvalidTimestamp || !strings.Contains(e.Message, "record timestamp "+strconv.FormatInt(tc.ts, 10)) || !strings.Contains(e.Message, tc.says) {
			t.Fatalf("timestamp %d: got %v, want INVALID_TIMESTAMP naming it and %q", tc.ts, err, tc.says)
		}
	}
	if leo := c.leo("ts"); leo != 0 {
		t.Fatalf("log end offset %d, want 0", leo)
	}
	if _, err := c.produce("ts", 0, 1, "now"); err != nil {
		t.Fatalf("a record stamped now: %v", err)
	}
}

// A principal over its byte rate is served, but its answer is held back
// and says for how long; a principal without that quota is not.
func TestQuotaThrottlesThePrincipalOverItsRate(t *testing.T) {
	settings := map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"}
	over := map[string]string{"quota.producer.overrides": "ANONYMOUS:1000", "quota.consumer.overrides": "ANONYMOUS:1000"}
	other := map[string]string{"quota.producer.overrides": "alice:1000", "quota.consumer.overrides": "alice:1000"}
	for name, quotas := range map[string]map[string]string{"over": over, "other": other} {
		t.Run(name, func(t *testing.T) {
			for k, v := range settings {
				quotas[k] = v
			}
			c := newClusterFn(t, 1, quotas, func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" })
			c.ctrl.createTopic("q", 1, 1, nil)
			start := time.Now()
			resp, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "q", Acks: 1,
				Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf(strings.Repeat("p", 1500))}})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetBaseOffset() != 0 {
				t.Fatalf("produce answered %v: over quota is delayed, never refused", resp)
			}
			fresp, err := c.client(1).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "q", RawBatches: true})
			if err != nil || len(fresp.GetRecordBatches()) == 0 {
				t.Fatalf("fetch: %v, %v", fresp, err)
			}
			body := scrape(t, c.brokers[1].MetricsAddr())
			if name == "other" {
				if resp.GetThrottleTimeMs() != 0 || fresp.GetThrottleTimeMs() != 0 {
					t.Fatalf("ANONYMOUS without a quota throttled: produce %d ms, fetch %d ms", resp.GetThrottleTimeMs(), fresp.GetThrottleTimeMs())
				}
				if strings.Contains(body, "tidemark_broker_quota_throttled_total{") {
					t.Fatal("throttle counted for a principal under no quota")
				}
				return
			}
			// ~1570 bytes over a 1 s window against 1000 B/s: ~570 ms.
			if ms := resp.GetThrottleTimeMs(); ms <= 0 || ms > 2000 {
				t.Fatalf("produce throttle_time_ms = %d, want in (0, 2000]", ms)
			}
			if took < time.Duration(resp.GetThrottleTimeMs())*time.Millisecond {
				t.Fatalf("answer came after %v, before its throttle time %d ms", took, resp.GetThrottleTimeMs())
			}
			if fresp.GetThrottleTimeMs() <= 0 {
				t.Fatalf("fetch throttle_time_ms = %d, want > 0", fresp.GetThrottleTimeMs())
			}
			for _, kind := range []string{"produce", "fetch"} {
				if v := metricValue(t, body, `tidemark_broker_quota_throttled_total{kind="`+kind+`"}`); v != 1 {
					t.Fatalf("throttled_total{%s} = %v, want 1", kind, v)
				}
			}
		})
	}
}

// TestThrottledFetchReadsAfterItsWait: a consumer over its quota waits out
// what it owes before its next fetch reads anything, so the broker holds
// no records while it waits: a record appended during the wait is in that
// fetch's answer (had the fetch read first and then waited, it would have
// answered without it).
func TestThrottledFetchReadsAfterItsWait(t *testing.T) {
	quotas := map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1",
		"quota.consumer.overrides": "ANONYMOUS:100"}
	c := newClusterFn(t, 1, quotas, func(*broker.Config) {})
	c.ctrl.createTopic("fq", 1, 1, nil)
	if _, err := c.produce("fq", 0, 1, strings.Repeat("a", 1500)); err != nil {
		t.Fatal(err)
	}
	first, err := c.client(1).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "fq", RawBatches: true})
	if err != nil || len(first.GetRecordBatches()) == 0 {
		t.Fatalf("first fetch: %v, %v", first, err)
	}
	// 1,500 B against 100 B/s over a 1 s window: the cap, 2 s, is owed.
	if ms := first.GetThrottleTimeMs(); ms < 1000 {
		t.Fatalf("first fetch throttle_time_ms = %d, want the capped 2000", ms)
	}
	type answer struct {
		resp *brokerv1.FetchResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := c.client(1).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "fq", Offset: first.GetNextOffset()})
		done <- answer{r, err}
	}()
	time.Sleep(100 * time.Millisecond) // the second fetch is waiting out its 2 s
	if _, err := c.produce("fq", 0, 1, "during the wait"); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.resp.GetRecords()) != 1 || string(a.resp.GetRecords()[0].GetValue()) != "during the wait" {
		t.Fatalf("throttled fetch answered %v: it read before its wait", a.resp.GetRecords())
	}
	if a.resp.GetThrottleTimeMs() <= 0 {
		t.Fatalf("throttled fetch throttle_time_ms = %d, want > 0", a.resp.GetThrottleTimeMs())
	}
}

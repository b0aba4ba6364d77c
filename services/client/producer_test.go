package client_test

import (
	"errors"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
)

func TestProduceRoundTrip(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{})
	ctx := testCtx(t, 5*time.Second)

	ts := time.UnixMilli(1_700_000_000_000)
	for i := range 3 {
		res, err := p.Produce(ctx, client.Record{
			Topic: "t", Key: []byte("k"), Value: value(i), Timestamp: ts,
			Headers: []client.Header{{Key: "h", Value: []byte("v")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Offset != int64(i) || res.Partition != 0 || res.Code != kerr.None || !res.Timestamp.Equal(ts) {
			t.Fatalf("result %d = %+v", i, res)
		}
	}
	got := checkLog(t, fc, "t", 0, [][]byte{value(0), value(1), value(2)})
	if string(got[0].Key) != "k" || len(got[0].Headers) != 1 || got[0].Timestamp != ts.UnixMilli() {
		t.Fatalf("stored record %+v", got[0])
	}
	if !p.Idempotent() {
		t.Fatal("idempotence should be on by default")
	}
	if n := fc.Calls("InitProducerId"); n != 1 {
		t.Fatalf("InitProducerId called %d times, want once per producer", n)
	}
}

func TestLingerCollectsRecordsIntoOneRequest(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	const linger = 150 * time.Millisecond
	p := newProducer(t, c, client.ProducerOptions{Linger: linger})

	out := newOutcomes(t, 10)
	start := time.Now()
	for i := range 10 {
		p.ProduceAsync(client.Record{Topic: "t", Value: value(i)}, out.cb(i))
	}
	time.Sleep(linger / 3)
	if n := fc.Calls("Produce"); n != 0 {
		t.Fatalf("%d produce requests before linger.ms passed", n)
	}
	out.wait(5 * time.Second)
	if el := time.Since(start); el < linger {
		t.Fatalf("acknowledged after %v, before linger %v", el, linger)
	}
	if n := fc.Calls("Produce"); n != 1 {
		t.Fatalf("%d produce requests, want 1", n)
	}
	for i, r := range out.res {
		if out.errs[i] != nil || r.Offset != int64(i) {
			t.Fatalf("record %d: %+v %v", i, r, out.errs[i])
		}
	}
}

func TestBatchSizeSplitsBatches(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	const batchSize = 1024
	p := newProducer(t, c, client.ProducerOptions{Linger: 10 * time.Second, BatchSize: batchSize})

	const n = 100
	val := make([]byte, 100)
	out := newOutcomes(t, n)
	for i := range n {
		p.ProduceAsync(client.Record{Topic: "t", Key: []byte{byte(i)}, Value: val, ManualPartition: true}, out.cb(i))
	}
	if err := p.Flush(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	out.wait(time.Second)
	sizes := fc.BatchSizes()
	// Each record takes 110 bytes: eight fit in 1024 with the 61-byte header.
	if len(sizes) != (n+7)/8 {
		t.Fatalf("%d batches for %d records of 100 bytes with batch.size %d: %v", len(sizes), n, batchSize, sizes)
	}
	for _, s := range sizes {
		if s > batchSize {
			t.Fatalf("batch of %d bytes exceeds batch.size %d", s, batchSize)
		}
	}
	for i := range n {
		if out.errs[i] != nil || out.res[i].Offset != int64(i) {
			t.Fatalf("record %d: %+v %v", i, out.res[i], out.errs[i])
		}
	}
}

func TestKeysPickPartitionsByMurmur2(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 8)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1})
	ctx := testCtx(t, 5*time.Second)
	// Partitions Kafka's default partitioner gives these keys with 8 partitions.
	for key, want := range map[string]int32{"foobar": 6, "21": 4, "abc": 3} {
		res, err := p.Produce(ctx, client.Record{Topic: "t", Key: []byte(key), Value: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Partition != want {
			t.Errorf("key %q went to partition %d, want %d", key, res.Partition, want)
		}
	}
	res, err := p.Produce(ctx, client.Record{Topic: "t", Partition: 7, ManualPartition: true, Value: []byte("x")})
	if err != nil || res.Partition != 7 {
		t.Fatalf("manual partition: %+v %v", res, err)
	}
	// A partition the metadata does not list may be one just created: the
	// producer waits for it up to max.block.ms, as Kafka's does.
	quick := newProducer(t, c, client.ProducerOptions{MaxBlock: 300 * time.Millisecond})
	start := time.Now()
	_, err = quick.Produce(ctx, client.Record{Topic: "t", Partition: 8, ManualPartition: true})
	if codeOf(err) != kerr.UnknownTopicOrPartition {
		t.Fatalf("partition 8 of 8: %v", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("gave up on partition 8 after %v, before max.block.ms", waited)
	}
}

func TestRetriableAndFatalCodes(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1})
	ctx := testCtx(t, 5*time.Second)

	// Retriable: the first two attempts are refused, the third goes through.
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" && call.N <= 2 {
			return &fakebroker.Fault{Code: kerr.NotEnoughReplicas}
		}
		return nil
	})
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(0)}); err != nil || res.Offset != 0 {
		t.Fatalf("after NOT_ENOUGH_REPLICAS twice: %+v %v", res, err)
	}
	if n := fc.Calls("Produce"); n != 3 {
		t.Fatalf("%d produce calls, want 3", n)
	}

	// Fatal: not retried, the code reaches the caller, later records go on.
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" && call.N == 4 {
			return &fakebroker.Fault{Code: kerr.MessageTooLarge}
		}
		return nil
	})
	res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(1)})
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Code != kerr.MessageTooLarge || res.Code != kerr.MessageTooLarge || res.Offset != -1 {
		t.Fatalf("MESSAGE_TOO_LARGE: %+v %v", res, err)
	}
	if n := fc.Calls("Produce"); n != 4 {
		t.Fatalf("%d produce calls, want 4: a fatal answer is not retried", n)
	}
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(2)}); err != nil || res.Offset != 1 {
		t.Fatalf("after a fatal error: %+v %v", res, err)
	}
	checkLog(t, fc, "t", 0, [][]byte{value(0), value(2)})
}

func TestRetriesLimit(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1, Retries: 2, Idempotence: client.IdempotenceOff})
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" {
			return &fakebroker.Fault{Code: kerr.NotEnoughReplicas}
		}
		return nil
	})
	_, err := p.Produce(testCtx(t, 5*time.Second), client.Record{Topic: "t", Value: value(0)})
	if codeOf(err) != kerr.NotEnoughReplicas {
		t.Fatalf("want NOT_ENOUGH_REPLICAS after retries, got %v", err)
	}
	if n := fc.Calls("Produce"); n != 3 {
		t.Fatalf("%d attempts with retries=2, want 3", n)
	}
}

func TestProducerConfigErrorsNameTheOption(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	c := newClient(t, fc)
	for _, tc := range []struct {
		o     client.ProducerOptions
		field string
	}{
		{client.ProducerOptions{Idempotence: client.IdempotenceOn, Acks: client.AcksLeader}, "acks"},
		{client.ProducerOptions{Idempotence: client.IdempotenceOn, MaxInFlight: 6}, "max.in.flight.requests.per.connection"},
		{client.ProducerOptions{DeliveryTimeout: time.Second, RequestTimeout: 2 * time.Second}, "delivery.timeout.ms"},
	} {
		_, err := client.NewProducer(c, tc.o)
		var ke *kerr.Error
		if !errors.As(err, &ke) || ke.Code != kerr.InvalidConfig || ke.Field != tc.field {
			t.Errorf("%+v: got %v, want INVALID_CONFIG naming %s", tc.o, err, tc.field)
		}
	}
	// Without an explicit setting, conflicting options turn idempotence off (Kafka 3.2+).
	p, err := client.NewProducer(c, client.ProducerOptions{Acks: client.AcksLeader})
	if err != nil || p.Idempotent() {
		t.Fatalf("acks=1 with default idempotence: idempotent=%v err=%v", p != nil && p.Idempotent(), err)
	}
}

func TestCloseFlushesAndRefusesLaterRecords(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p, err := client.NewProducer(c, client.ProducerOptions{Linger: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out := newOutcomes(t, 5)
	for i := range 5 {
		p.ProduceAsync(client.Record{Topic: "t", Value: value(i)}, out.cb(i))
	}
	if err := p.Close(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	out.wait(time.Second)
	for i := range 5 {
		if out.errs[i] != nil {
			t.Fatalf("record %d: %v", i, out.errs[i])
		}
	}
	late := newOutcomes(t, 1)
	p.ProduceAsync(client.Record{Topic: "t", Value: value(9)}, late.cb(0))
	late.wait(time.Second)
	if !errors.Is(late.errs[0], client.ErrClosed) {
		t.Fatalf("after Close: %v", late.errs[0])
	}
}

func TestCloseDeadlineFailsPendingRecords(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p, err := client.NewProducer(c, client.ProducerOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" {
			return &fakebroker.Fault{Delay: 10 * time.Second}
		}
		return nil
	})
	out := newOutcomes(t, 20)
	for i := range 20 {
		p.ProduceAsync(client.Record{Topic: "t", Value: value(i)}, out.cb(i))
	}
	start := time.Now()
	if err := p.Close(testCtx(t, 200*time.Millisecond)); err == nil {
		t.Fatal("Close met its deadline although nothing was acknowledged")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Close took %v after its deadline", el)
	}
	out.wait(time.Second)
	for i := range 20 {
		if codeOf(out.errs[i]) != kerr.RequestTimedOut {
			t.Fatalf("record %d: %v", i, out.errs[i])
		}
	}
}

func TestAcksLeaderAndNone(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	leader := newProducer(t, c, client.ProducerOptions{Acks: client.AcksLeader, Linger: -1})
	if res, err := leader.Produce(ctx, client.Record{Topic: "t", Value: value(0)}); err != nil || res.Offset != 0 {
		t.Fatalf("acks=1: %+v %v", res, err)
	}
	none := newProducer(t, c, client.ProducerOptions{Acks: client.AcksNone, Linger: -1})
	if res, err := none.Produce(ctx, client.Record{Topic: "t", Value: value(1)}); err != nil || res.Offset != -1 {
		t.Fatalf("acks=0: %+v %v", res, err)
	}
	checkLog(t, fc, "t", 0, values(2))
	if leader.Idempotent() || none.Idempotent() {
		t.Fatal("idempotence needs acks=all")
	}
}

func TestKeylessRecordsStickThenMoveOn(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 4)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: time.Second, BatchSize: 200})
	const n = 40
	out := newOutcomes(t, n)
	for i := range n {
		p.ProduceAsync(client.Record{Topic: "t", Value: value(i)}, out.cb(i))
	}
	if err := p.Flush(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	out.wait(time.Second)
	// Consecutive records share a partition until a batch fills.
	switches := 0
	for i := 1; i < n; i++ {
		if out.res[i].Partition != out.res[i-1].Partition {
			switches++
		}
	}
	batches := 0
	for part := range int32(4) {
		batches += fc.BatchCount("t", part)
	}
	if switches == 0 || switches != batches-1 {
		t.Fatalf("%d partition switches for %d batches", switches, batches)
	}
}

func TestUnknownTopicFailsAfterMaxBlock(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	c := newClient(t, fc)
	if _, err := c.Metadata(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, c, client.ProducerOptions{MaxBlock: 200 * time.Millisecond})
	out := newOutcomes(t, 1)
	start := time.Now()
	p.ProduceAsync(client.Record{Topic: "nope", Value: value(0)}, out.cb(0))
	out.wait(2 * time.Second)
	if out.res[0].Code != kerr.UnknownTopicOrPartition || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("after %v: %+v %v", time.Since(start), out.res[0], out.errs[0])
	}
}

package clustertest

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// encodedBatch is one record batch of values, for a produce stream
// (producer id -1: no idempotence).
func encodedBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	var b recordbatch.Builder
	for _, v := range values {
		b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
	}
	return b.Build(pid, epoch, seq)
}

// recvWithin receives the next answer of a produce stream, failing the
// test if none comes within d.
func recvWithin(t *testing.T, st brokerv1.BrokerService_ProduceStreamClient, d time.Duration) *brokerv1.ProduceStreamResponse {
	t.Helper()
	type got struct {
		m   *brokerv1.ProduceStreamResponse
		err error
	}
	ch := make(chan got, 1)
	go func() {
		m, err := st.Recv()
		ch <- got{m, err}
	}()
	select {
	case g := <-ch:
		if g.err != nil {
			t.Fatalf("produce stream: %v", g.err)
		}
		return g.m
	case <-time.After(d):
		t.Fatalf("no answer on the produce stream within %s", d)
		return nil
	}
}

// One produce stream: an acks=-1 request parked for the HW does not hold
// back the answer of a request sent after it; a refused request is answered
// with its error and the stream goes on; batches of one idempotent producer
// sent back to back land in order, each once.
func TestProduceStreamAnswersEachRequestOnItsOwn(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true }})
	c.CreateTopic("park", 1, 3, map[string]string{"min.insync.replicas": "2"})
	c.WaitFor(10*time.Second, "park with a leader and the full ISR", func() bool {
		pd := c.Partition("park", 0)
		return pd.GetLeader() > 0 && len(pd.GetIsr()) == 3
	})
	leader := c.Partition("park", 0).GetLeader()
	c.CreateTopic("free", 1, 1, nil) // placed anywhere; refused where it is not led
	ctx := context.Background()
	for id := int32(1); id <= 3; id++ {
		if id == leader {
			continue
		}
		fc := faultv1.NewFaultInjectionServiceClient(c.Conn(c.Broker(id).Addr()))
		if _, err := fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{Topic: "park", Partition: -1, Stall: true}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.BrokerClient(leader).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id uint64, req *brokerv1.ProduceRequest) {
		t.Helper()
		if err := st.Send(&brokerv1.ProduceStreamRequest{CorrelationId: id, Request: req}); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(pid int64, seq int32, v string) *brokerv1.ProduceRequest_RecordBatch {
		return &brokerv1.ProduceRequest_RecordBatch{RecordBatch: encodedBatch(pid, 0, seq, v)}
	}

	// 1: parked (the followers cannot fetch). 2: acks=1 on the same
	// partition, answered at its append. 3: no such topic. 4: acks=1 again.
	send(1, &brokerv1.ProduceRequest{Topic: "park", Acks: -1, TimeoutMs: 20000, Payload: batch(-1, -1, "parked")})
	send(2, &brokerv1.ProduceRequest{Topic: "park", Acks: 1, Payload: batch(-1, -1, "leader-acked")})
	send(3, &brokerv1.ProduceRequest{Topic: "nowhere", Acks: 1, Payload: batch(-1, -1, "x")})
	send(4, &brokerv1.ProduceRequest{Topic: "park", Acks: 1, Payload: batch(-1, -1, "after-refusal")})
	answers := map[uint64]*brokerv1.ProduceStreamResponse{}
	for range 3 {
		m := recvWithin(t, st, 10*time.Second)
		answers[m.GetCorrelationId()] = m
	}
	if _, ok := answers[1]; ok {
		t.Fatalf("the parked acks=-1 request was answered before the HW could reach it: %v", answers[1])
	}
	if a := answers[2]; a.GetError() != nil || a.GetResponse().GetBaseOffset() != 1 {
		t.Fatalf("acks=1 behind a parked request: %v, want offset 1", a)
	}
	if a := answers[3]; a.GetError().GetCode() != commonv1.ErrorCode(kerr.UnknownTopicOrPartition) || a.GetResponse() != nil {
		t.Fatalf("produce to a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION on its answer", a)
	}
	if a := answers[4]; a.GetError() != nil || a.GetResponse().GetBaseOffset() != 2 {
		t.Fatalf("acks=1 after a refused request on the same stream: %v, want offset 2", a)
	}
	for id := int32(1); id <= 3; id++ {
		fc := faultv1.NewFaultInjectionServiceClient(c.Conn(c.Broker(id).Addr()))
		if _, err := fc.ClearFaults(ctx, &faultv1.ClearFaultsRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if a := recvWithin(t, st, 10*time.Second); a.GetCorrelationId() != 1 || a.GetError() != nil || a.GetResponse().GetBaseOffset() != 0 {
		t.Fatalf("the parked request once the followers fetch: %v, want offset 0", a)
	}

	// An idempotent producer's batches, sent back to back with acks=-1:
	// the leader appends them in the order sent (no OUT_OF_ORDER_SEQUENCE)
	// while their waits for the HW overlap.
	pid, err := c.BrokerClient(leader).InitProducerId(ctx, &brokerv1.InitProducerIdRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		send(uint64(100+i), &brokerv1.ProduceRequest{Topic: "park", Acks: -1, TimeoutMs: 10000,
			Payload: batch(pid.GetProducerId(), int32(i), "seq-"+strconv.Itoa(i))})
	}
	offsets := map[uint64]int64{}
	for range n {
		m := recvWithin(t, st, 10*time.Second)
		if m.GetError() != nil {
			t.Fatalf("batch %d: %v", m.GetCorrelationId()-100, m.GetError())
		}
		offsets[m.GetCorrelationId()] = m.GetResponse().GetBaseOffset()
	}
	for i := range n {
		if got, want := offsets[uint64(100+i)], int64(3+i); got != want {
			t.Fatalf("batch %d at offset %d, want %d: the stream's batches were not appended in the order sent", i, got, want)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := c.SameLogs("park", 0, 1, 2, 3)
	if len(got) != 3+n || got[0] != "parked" || got[1] != "leader-acked" || got[3+n-1] != "seq-"+strconv.Itoa(n-1) {
		t.Fatalf("logs %v", got)
	}
}

// A produce stream carries encoded batches only: structured records, which
// the unary call counts before decoding, are refused before decoding on a
// stream too, with the field named.
func TestProduceStreamRefusesStructuredRecords(t *testing.T) {
	c := Start(t, Options{Brokers: 1})
	c.CreateTopic("t", 1, 1, nil)
	st, err := c.BrokerClient(1).ProduceStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&brokerv1.ProduceStreamRequest{CorrelationId: 1, Request: &brokerv1.ProduceRequest{Topic: "t", Acks: 1,
		Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record("v")}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	if e := kerr.FromCall(err); e == nil || e.Code != kerr.InvalidRequest || e.Field != "request.records" || !strings.Contains(e.Message, "record_batch") {
		t.Fatalf("structured records on a produce stream: %v, want INVALID_REQUEST naming request.records", err)
	}
}

// A produce stream keeps few workers between requests: once 200 requests
// parked at the same time (the followers cannot fetch) are answered, the
// stream holds at most a handful of idle goroutines, not one for each
// request it once had in flight; and after a quiet spell it answers the
// next request as before.
func TestProduceStreamKeepsFewWorkersAfterABurst(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true }})
	c.CreateTopic("burst", 1, 3, map[string]string{"min.insync.replicas": "2"})
	c.WaitFor(10*time.Second, "burst with a leader and the full ISR", func() bool {
		pd := c.Partition("burst", 0)
		return pd.GetLeader() > 0 && len(pd.GetIsr()) == 3
	})
	leader := c.Partition("burst", 0).GetLeader()
	ctx := context.Background()
	faults := func(stall bool) {
		t.Helper()
		for id := int32(1); id <= 3; id++ {
			if id == leader {
				continue
			}
			fc := faultv1.NewFaultInjectionServiceClient(c.Conn(c.Broker(id).Addr()))
			var err error
			if stall {
				_, err = fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{Topic: "burst", Partition: -1, Stall: true}})
			} else {
				_, err = fc.ClearFaults(ctx, &faultv1.ClearFaultsRequest{})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := c.BrokerClient(leader).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id uint64) {
		t.Helper()
		if err := st.Send(&brokerv1.ProduceStreamRequest{CorrelationId: id, Request: &brokerv1.ProduceRequest{Topic: "burst", Acks: -1, TimeoutMs: 30000,
			Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: encodedBatch(-1, -1, -1, "v"+strconv.FormatUint(id, 10))}}}); err != nil {
			t.Fatal(err)
		}
	}
	send(0) // the stream is open and served: count from here
	if a := recvWithin(t, st, 10*time.Second); a.GetError() != nil {
		t.Fatalf("first request: %v", a.GetError())
	}
	faults(true)
	before := runtime.NumGoroutine()
	const burst = 200
	for i := range burst {
		send(uint64(1 + i))
	}
	c.WaitFor(10*time.Second, "the burst parked on workers of its own", func() bool {
		return runtime.NumGoroutine() >= before+burst*9/10 // a few of the cluster's own may have ended meanwhile
	})
	faults(false)
	for range burst {
		if a := recvWithin(t, st, 20*time.Second); a.GetError() != nil {
			t.Fatalf("request %d of the burst: %v", a.GetCorrelationId(), a.GetError())
		}
	}
	c.WaitFor(10*time.Second, "the burst's workers gone but a few", func() bool {
		return runtime.NumGoroutine() <= before+40
	})
	t.Logf("goroutines: %d before the burst, %d after it was answered", before, runtime.NumGoroutine())

	time.Sleep(2 * time.Second) // nothing on the stream for a while
	send(burst + 1)
	if a := recvWithin(t, st, 10*time.Second); a.GetError() != nil || a.GetResponse().GetBaseOffset() != burst+1 {
		t.Fatalf("the request after a quiet spell: %v, want offset %d", a, burst+1)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("the stream after CloseSend: %v, want its end", err)
	}
	// Its idle workers leave with it.
	c.WaitFor(10*time.Second, "the stream's workers gone", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// A broker whose connection is being made again and does not answer (a
// dial that hangs, as to a host gone without a reset) holds up only the
// partitions it leads: writes to the other brokers go on. Before, the
// client opened every produce stream under one lock, so a write to a
// healthy broker waited for the unreachable one's connection attempt.
func TestAnUnreachableBrokerDoesNotHoldUpWritesToTheOthers(t *testing.T) {
	c := Start(t, Options{Brokers: 2})
	const topic = "two-leaders"
	c.CreateTopic(topic, 4, 1, nil)
	var mu sync.Mutex
	var hangAddr string
	conns := map[string][]net.Conn{}
	dialing := make(chan struct{}, 1)
	release := make(chan struct{})
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		mu.Lock()
		hang := addr == hangAddr
		mu.Unlock()
		if hang {
			select {
			case dialing <- struct{}{}:
			default:
			}
			<-release // ignores ctx: a connect that never completes
			return nil, errors.New("unreachable")
		}
		cn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			mu.Lock()
			conns[addr] = append(conns[addr], cn)
			mu.Unlock()
		}
		return cn, err
	}
	p, err := client.NewProducer(c.ClientWith(client.Options{Dialer: dial}), client.ProducerOptions{Acks: client.AcksAll, Linger: -1,
		DeliveryTimeout: 30 * time.Second, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The write to broker 1 is still waiting: give it up.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = p.Close(ctx)
	}()
	defer close(release) // before the Close above
	onBroker := map[int32]int32{}
	for part := range int32(4) {
		onBroker[c.Partition(topic, part).GetLeader()] = part
	}
	cut, healthy := onBroker[1], onBroker[2]
	if len(onBroker) != 2 {
		t.Fatalf("leaders of %s: %v, want both brokers", topic, onBroker)
	}
	for _, part := range []int32{cut, healthy} {
		if _, err := p.Produce(context.Background(), client.Record{Topic: topic, Partition: part, ManualPartition: true, Value: []byte("warm")}); err != nil {
			t.Fatal(err)
		}
	}
	// Broker 1's connection breaks and cannot be made again.
	mu.Lock()
	hangAddr = c.BrokerConfig(1).Listen
	for _, cn := range conns[hangAddr] {
		cn.Close()
	}
	mu.Unlock()
	p.ProduceAsync(client.Record{Topic: topic, Partition: cut, ManualPartition: true, Value: []byte("to-the-cut-broker")}, nil)
	select {
	case <-dialing:
	case <-time.After(10 * time.Second):
		t.Fatal("the client never tried to connect to broker 1 again")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Produce(ctx, client.Record{Topic: topic, Partition: healthy, ManualPartition: true, Value: []byte("to-the-healthy-broker")}); err != nil {
		t.Fatalf("a write to healthy broker 2 while broker 1's connection hangs: %v", err)
	}
}

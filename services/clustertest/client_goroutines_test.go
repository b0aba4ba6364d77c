package clustertest

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

// The Go client's Close calls return only once every goroutine the closed
// value started has ended: a program that checks for leaked goroutines, or
// stops its cluster, right after Close finds none of the client's. Each
// test snapshots the goroutines once, at the moment Close returned.

// clientGoroutines lists, by goroutine id, the goroutines running the Go
// client's code or started by it, with their stacks.
func clientGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		f := strings.Fields(header) // goroutine <id> [<state>]:
		if len(f) < 2 {
			continue
		}
		for line := range strings.SplitSeq(g, "\n") {
			fn := strings.TrimPrefix(line, "created by ")
			if strings.HasPrefix(fn, "tidemark.io/services/client.") || strings.HasPrefix(fn, "tidemark.io/services/client/") {
				out[f[1]] = g
				break
			}
		}
	}
	return out
}

// newClientGoroutines are the client goroutines now running that were not
// in before, except those whose stack holds one of allowed.
func newClientGoroutines(before map[string]string, allowed ...string) []string {
	var out []string
	for id, g := range clientGoroutines() {
		if _, ok := before[id]; ok || slices.ContainsFunc(allowed, func(a string) bool { return strings.Contains(g, a) }) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// noneLeft fails the test with the stacks of client goroutines (not in
// before, nor holding one of allowed) still running after what, once those
// that were on their way out have had a moment to return: a goroutine whose
// last act is a WaitGroup's Done (a request's watch) has been waited for,
// yet it still has to return, and on a loaded machine its next slice may
// come a little later (seen in CI: one at the closing brace of its
// function, runnable).
func noneLeft(t *testing.T, what string, before map[string]string, allowed ...string) {
	t.Helper()
	left := newClientGoroutines(before, allowed...)
	for deadline := time.Now().Add(200 * time.Millisecond); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		left = newClientGoroutines(before, allowed...)
	}
	if len(left) > 0 {
		t.Fatalf("%d client goroutines still running when %s returned:\n\n%s", len(left), what, strings.Join(left, "\n\n"))
	}
}

// produceReceiver is the one goroutine a Client keeps for a produce
// stream; the Client's Close ends it, a Producer's does not.
const produceReceiver = "client.(*produceLink).receive"

// An idempotent producer wrote to three partitions (a partition goroutine
// and a writer each, the InitProducerId request, a produce stream per
// leader), then, its connections stalled, holds requests in flight: Close
// with a short deadline gives them up and returns with every producer
// goroutine ended, the watches on the given-up requests included; the
// Client's Close then ends the stream receivers. (The goroutines the old
// Close left behind here ended within microseconds; noneLeft's moment for
// goroutines on their way out forgives those, so this test guards against
// goroutines left blocked.)
func TestProducerAndClientCloseEndTheirGoroutines(t *testing.T) {
	c := Start(t, Options{})
	const topic = "closing"
	c.CreateTopic(topic, 3, 3, nil)
	c.WaitAnnounced(topic, 3)
	before := clientGoroutines()
	cl := c.GroupClientVia("producer-client")
	p, err := client.NewProducer(cl, client.ProducerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for part := range int32(3) {
		if _, err := p.Produce(ctx, client.Record{Topic: topic, Partition: part, ManualPartition: true, Value: []byte("first")}); err != nil {
			t.Fatal(err)
		}
	}
	if len(newClientGoroutines(before)) == 0 {
		t.Fatal("the producer runs no goroutine the test can see: the stacks are not what it looks for")
	}

	c.Net.Pause("producer-client")
	t.Cleanup(func() { c.Net.Resume("producer-client") })
	outcomes := make(chan error, 30)
	for i := range 30 {
		p.ProduceAsync(client.Record{Topic: topic, Partition: int32(i % 3), ManualPartition: true, Value: []byte("stalled")},
			func(_ client.Result, err error) { outcomes <- err })
	}
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer closeCancel()
	err = p.Close(closeCtx)
	noneLeft(t, "Producer.Close", before, produceReceiver)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with requests held by a stalled connection: %v, want its deadline", err)
	}
	for range 30 {
		if err := <-outcomes; err == nil {
			t.Fatal("a record held by a stalled connection was acknowledged")
		}
	}

	// gRPC gives each stalled connection 5 s to take its GOAWAY before
	// it is dropped; the receivers end either way.
	c.Net.Resume("producer-client")
	_ = cl.Close()
	noneLeft(t, "Client.Close", before)
}

// A group member has joined, owns every partition and its fetchers are
// parked in long polls on caught-up partitions, with an auto-commit and a
// CommitAsync whose callback is slow: Close commits, leaves and returns
// with no goroutine of the consumer left, the callback's included.
func TestGroupConsumerCloseEndsItsGoroutines(t *testing.T) {
	c := StartConsumerCluster(t)
	const topic = "closing"
	c.CreateTopic(topic, 4, 3, nil)
	c.ProduceEach(topic, 4, 0, 3)
	before := clientGoroutines()
	cl := c.GroupClient()
	o := GroupOpts("closers", topic)
	o.MaxWait = 10 * time.Second // the fetchers park in the brokers' long poll
	gc := joinedAndCaughtUp(t, cl, o, 12)

	callback := make(chan error, 1)
	gc.CommitAsync(nil, func(_ map[client.TopicPartition]int64, err error) {
		time.Sleep(200 * time.Millisecond) // a slow handler: Close waits for it
		callback <- err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := gc.Close(ctx)
	noneLeft(t, "GroupConsumer.Close", before)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-callback:
		if err != nil && !errors.Is(err, client.ErrClosed) {
			t.Fatalf("CommitAsync's callback: %v", err)
		}
	default:
		t.Fatal("Close returned before CommitAsync's callback did")
	}
	_ = cl.Close()
	noneLeft(t, "Client.Close", before)
}

// Abandon, with the fetchers parked in long polls, the member in the group
// and its connections stalled, returns with no goroutine of the consumer
// left.
func TestGroupConsumerAbandonEndsItsGoroutines(t *testing.T) {
	c := StartConsumerCluster(t)
	const topic = "abandoned"
	c.CreateTopic(topic, 4, 3, nil)
	c.ProduceEach(topic, 4, 0, 3)
	before := clientGoroutines()
	cl := c.GroupClientVia("abandoning-client")
	o := GroupOpts("abandoners", topic)
	o.MaxWait = 10 * time.Second
	gc := joinedAndCaughtUp(t, cl, o, 12)

	c.Net.Pause("abandoning-client")
	t.Cleanup(func() { c.Net.Resume("abandoning-client") })
	gc.CommitAsync(nil, nil) // held by the stalled connection
	gc.Abandon()
	noneLeft(t, "GroupConsumer.Abandon", before)
}

// A member whose connections stall while it holds fetches and a commit in
// flight: Close gives up at its deadline and still returns with no
// goroutine of the consumer left.
func TestGroupConsumerCloseOnAStalledConnectionEndsItsGoroutines(t *testing.T) {
	c := StartConsumerCluster(t)
	const topic = "stalled"
	c.CreateTopic(topic, 2, 3, nil)
	c.ProduceEach(topic, 2, 0, 3)
	before := clientGoroutines()
	cl := c.GroupClientVia("stalled-client")
	o := GroupOpts("stallers", topic)
	o.MaxWait = 10 * time.Second
	gc := joinedAndCaughtUp(t, cl, o, 6)

	c.Net.Pause("stalled-client")
	t.Cleanup(func() { c.Net.Resume("stalled-client") })
	callback := make(chan error, 1)
	gc.CommitAsync(nil, func(_ map[client.TopicPartition]int64, err error) { callback <- err })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- gc.Close(ctx) }()
	select {
	case err := <-closed:
		noneLeft(t, "GroupConsumer.Close", before)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close on a stalled connection: %v, want its deadline", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close with a 1 s deadline on a stalled connection has not returned after 15 s")
	}
	select {
	case err := <-callback:
		if !errors.Is(err, client.ErrClosed) {
			t.Fatalf("the CommitAsync given up: %v, want ErrClosed", err)
		}
	default:
		t.Fatal("Close returned before the callback of the commit it gave up")
	}
}

// joinedAndCaughtUp starts a member on cl and polls until it owns every
// partition and has read want records, then once more, so that its
// fetchers wait in the brokers' long poll.
func joinedAndCaughtUp(t *testing.T, cl *client.Client, o client.GroupOptions, want int) *client.GroupConsumer {
	t.Helper()
	gc, err := client.NewGroupConsumer(cl, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gc.Abandon)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := 0
	for got < want {
		recs, err := gc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}
	if got != want {
		t.Fatalf("read %d records, want %d", got, want)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if recs, _ := gc.Poll(short); len(recs) > 0 {
		t.Fatalf("read %d records more than were written", len(recs))
	}
	return gc
}

// WatchCluster's iteration, once the caller stops it, has ended the
// goroutine that watched its stream for silence.
func TestAdminWatchClusterEndsItsGoroutines(t *testing.T) {
	c := Start(t, Options{})
	before := clientGoroutines()
	var addrs []string
	for _, id := range slices.Sorted(maps.Keys(c.ctrlCfg)) {
		addrs = append(addrs, c.ctrlCfg[id].Listen)
	}
	tc, err := c.tls.ClientOrNil()
	if err != nil {
		t.Fatal(err)
	}
	a, err := client.NewAdmin(addrs, client.Options{TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for snap, err := range a.WatchCluster(ctx, &adminv1.WatchClusterRequest{IntervalMs: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		if snap == nil {
			t.Fatal("WatchCluster yielded neither a snapshot nor an error")
		}
		break
	}
	noneLeft(t, "the WatchCluster iteration", before)
	_ = a.Close()
	noneLeft(t, "Admin.Close", before)
}

// A producer wrote to partitions led by every broker, one produce stream
// each, through a stream interceptor that is slow to hand on a stream's
// end: once the producer is closed, the Client's Close returns only after
// the streams' receive goroutines have.
func TestClientCloseEndsItsProduceStreams(t *testing.T) {
	c := Start(t, Options{})
	const topic = "streams"
	c.CreateTopic(topic, 6, 3, nil)
	c.WaitAnnounced(topic, 6)
	before := clientGoroutines()
	slowEnd := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return slowEndStream{s}, err
	})
	cl := c.ClientWith(client.Options{DialOptions: []grpc.DialOption{slowEnd}})
	p, err := client.NewProducer(cl, client.ProducerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for part := range int32(6) {
		if _, err := p.Produce(ctx, client.Record{Topic: topic, Partition: part, ManualPartition: true, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	noneLeft(t, "Producer.Close", before, produceReceiver)
	if left := newClientGoroutines(before); len(left) == 0 {
		t.Fatal("no produce stream receiver before Client.Close: the stacks are not what the test looks for")
	}
	_ = cl.Close()
	noneLeft(t, "Client.Close", before)
}

// slowEndStream hands on its stream's end 200 ms late, as an interceptor
// that records something on the way out.
type slowEndStream struct{ grpc.ClientStream }

func (s slowEndStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// A CommitAsync callback may close its own consumer, with Close or
// Abandon, while the application closes it too or before it does: each
// call returns (neither waits for the callback it is called from) and no
// goroutine of the consumer is left once they have.
func TestACommitCallbackMayCloseItsOwnConsumer(t *testing.T) {
	c := StartConsumerCluster(t)
	const topic = "self-closing"
	c.CreateTopic(topic, 2, 3, nil)
	c.ProduceEach(topic, 2, 0, 3)
	for _, tc := range []struct {
		name      string
		inside    func(gc *client.GroupConsumer) error
		appCloses bool
	}{
		{"Close from the callback alone", func(gc *client.GroupConsumer) error { return gc.Close(context.Background()) }, false},
		{"Abandon from the callback alone", func(gc *client.GroupConsumer) error { gc.Abandon(); return nil }, false},
		{"Close from the callback and the application", func(gc *client.GroupConsumer) error { return gc.Close(context.Background()) }, true},
		{"Abandon from the callback, Close from the application", func(gc *client.GroupConsumer) error { gc.Abandon(); return nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clientGoroutines()
			cl := c.GroupClient()
			defer cl.Close()
			gc := joinedAndCaughtUp(t, cl, GroupOpts("self-closers-"+strings.ReplaceAll(tc.name, " ", "-"), topic), 6)
			inside := make(chan error, 1)
			gc.CommitAsync(nil, func(map[client.TopicPartition]int64, error) { inside <- tc.inside(gc) })
			if tc.appCloses {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := gc.Close(ctx); err != nil {
					t.Fatalf("the application's Close: %v", err)
				}
			}
			select {
			case err := <-inside:
				if err != nil {
					t.Fatalf("closing from the callback: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a callback closing its own consumer has not returned after 30 s")
			}
			gc.Abandon() // closed already: waits for the callback's goroutine only
			noneLeft(t, "closing from a callback", before)
		})
	}
}

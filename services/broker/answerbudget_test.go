package broker_test

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker"
)

// h2Client speaks HTTP/2 by hand so it can leave answers unread: it reads
// the frames the broker may send (headers, and DATA up to the 64 KiB
// window HTTP/2 starts with) but grants no more window until told to.
type h2Client struct {
	conn net.Conn
	fr   *http2.Framer
	wmu  sync.Mutex
	hbuf []byte
	enc  *hpack.Encoder

	mu       sync.Mutex
	answered map[uint32]bool   // response headers came: the answer was handed to gRPC
	data     map[uint32][]byte // DATA payloads
	status   map[uint32]string // grpc-status of ended streams
	err      error
}

func dialH2(t *testing.T, addr string) *h2Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &h2Client{conn: conn, fr: http2.NewFramer(conn, conn),
		answered: map[uint32]bool{}, data: map[uint32][]byte{}, status: map[uint32]string{}}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(writerTo(func(p []byte) { c.hbuf = append(c.hbuf, p...) }))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go c.read()
	return c
}

type writerTo func([]byte)

func (w writerTo) Write(p []byte) (int, error) { w(p); return len(p), nil }

func (c *h2Client) read() {
	for {
		f, err := c.fr.ReadFrame()
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.mu.Unlock()
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.DataFrame:
			c.data[f.StreamID] = append(c.data[f.StreamID], f.Data()...)
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				c.answered[f.StreamID] = true
			}
			for _, hf := range f.Fields {
				if hf.Name == "grpc-status" {
					c.status[f.StreamID] = hf.Value
				}
			}
		}
		c.mu.Unlock()
	}
}

func (c *h2Client) write(fn func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := fn(); err != nil && c.err == nil {
		c.err = err
	}
}

// fetch opens stream id with a Fetch of req.
func (c *h2Client) fetch(t *testing.T, id uint32, req *brokerv1.FetchRequest) {
	t.Helper()
	c.call(t, id, brokerv1.BrokerService_Fetch_FullMethodName, req, true)
}

// call opens stream id calling method with req; a stream left open (not
// last) can take more requests.
func (c *h2Client) call(t *testing.T, id uint32, method string, req proto.Message, last bool) {
	t.Helper()
	msg, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	c.write(func() error {
		c.hbuf = c.hbuf[:0]
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method},
			{":authority", "tidemark"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf, EndHeaders: true}); err != nil {
			return err
		}
		return c.fr.WriteData(id, last, append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...))
	})
}

// grant opens the connection's and the streams' windows wide: the client
// reads from now on.
func (c *h2Client) grant(ids []uint32) {
	c.write(func() error {
		for _, id := range append([]uint32{0}, ids...) {
			if err := c.fr.WriteWindowUpdate(id, 1<<30); err != nil {
				return err
			}
		}
		return nil
	})
}

// message is the first message stream id brought, once whole.
func (c *h2Client) message(id uint32, m proto.Message) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.data[id]
	if len(d) < 5 || len(d) < 5+int(binary.BigEndian.Uint32(d[1:5])) {
		return false
	}
	return proto.Unmarshal(d[5:5+binary.BigEndian.Uint32(d[1:5])], m) == nil
}

func (c *h2Client) state() (answered, ended int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.answered), len(c.status), c.err
}

// A client that sends many fetches on one connection and reads none of
// the answers holds at most max.queued.answer.bytes.per.connection of them
// in the broker; the fetches over it wait for room, and once the client
// reads, every one of them is answered with records.
func TestFetchAnswersAClientDoesNotReadAreBounded(t *testing.T) {
	const budget, calls = 2 << 20, 24
	c := newClusterFn(t, 1, nil, func(cfg *broker.Config) {
		cfg.MaxQueuedAnswerBytes = budget
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	c.ctrl.createTopic("a", 1, 1, nil)
	value := strings.Repeat("v", 250_000)
	for range 8 { // 2 MB in the log: every fetch below answers 1 MB
		if _, err := c.produce("a", 0, 1, value); err != nil {
			t.Fatal(err)
		}
	}
	h := dialH2(t, c.cfgs[1].Listen)
	var ids []uint32
	for i := range calls {
		id := uint32(2*i + 1)
		ids = append(ids, id)
		h.fetch(t, id, &brokerv1.FetchRequest{Topic: "a", Offset: 0, MaxBytes: 1 << 20, MaxWaitMs: 60_000, RawBatches: true})
	}
	// Two answers of 1 MB fit in 2 MiB; the others wait for the client to
	// read them.
	const fits = 2
	metrics := c.brokers[1].MetricsAddr()
	waitFor(t, 20*time.Second, "22 fetches waiting for room", func() bool {
		answered, _, err := h.state()
		if err != nil {
			t.Fatalf("connection: %v", err)
		}
		if answered > fits {
			t.Fatalf("%d fetch answers handed to gRPC for a client that reads none; %d fit in %d bytes", answered, fits, budget)
		}
		return answered == fits && metricValue(t, scrape(t, metrics), "tidemark_answer_budget_waits_total") == calls-fits
	})
	if held := metricValue(t, scrape(t, metrics), "tidemark_answer_bytes_reserved_connection_max"); held > budget || held < 2_000_000 {
		t.Fatalf("the connection holds %v bytes of answers, want the two answers' (<= %d)", held, budget)
	}

	h.grant(ids)
	waitFor(t, 30*time.Second, "every fetch answered", func() bool {
		_, ended, err := h.state()
		if err != nil {
			t.Fatalf("connection: %v", err)
		}
		return ended == calls
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		resp := &brokerv1.FetchResponse{}
		if d := h.data[id]; h.status[id] != "0" || len(d) < 5 || proto.Unmarshal(d[5:], resp) != nil || len(resp.GetRecordBatches()) < 250_000 {
			t.Fatalf("fetch on stream %d: grpc-status %q, %d bytes of records; want OK and records", id, h.status[id], len(resp.GetRecordBatches()))
		}
	}
	if held := metricValue(t, scrape(t, metrics), "tidemark_answer_bytes_reserved"); held != 0 {
		t.Fatalf("%v bytes of answers still charged with every answer read", held)
	}
}

// A follower's fetch over its connection's budget waits for room too, and
// then reads what fits.
func TestAReplicaFetchOverTheAnswerBudgetWaitsForRoom(t *testing.T) {
	const budget = 1 << 20
	c := newClusterFn(t, 2, nil, func(cfg *broker.Config) {
		cfg.MaxQueuedAnswerBytes = budget
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	c.ctrl.createTopic("r", 1, 2, nil)
	value := strings.Repeat("v", 250_000)
	for range 8 {
		if _, err := c.produce("r", 0, 1, value); err != nil {
			t.Fatal(err)
		}
	}
	c.sameLogs("r", 0, 1, 2) // the real follower is idle from here on
	metrics := c.brokers[1].MetricsAddr()
	h := dialH2(t, c.cfgs[1].Listen)
	h.fetch(t, 1, &brokerv1.FetchRequest{Topic: "r", Offset: 0, MaxBytes: 1 << 20, RawBatches: true})
	waitFor(t, 20*time.Second, "the fetch answered, unread", func() bool { answered, _, _ := h.state(); return answered == 1 })
	h.call(t, 3, replicationv1.ReplicationService_ReplicaFetch_FullMethodName, &replicationv1.ReplicaFetchRequest{ReplicaId: 2, MaxBytes: 1 << 20,
		Partitions: []*replicationv1.ReplicaFetchPartition{{Topic: "r", Partition: 0, FetchOffset: 0,
			CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, PartitionMaxBytes: 1 << 20}}}, false)
	waitFor(t, 20*time.Second, "the replica fetch waiting for room", func() bool {
		if answered, _, _ := h.state(); answered > 1 {
			t.Fatalf("%d answers handed to gRPC; the budget holds one", answered)
		}
		return metricValue(t, scrape(t, metrics), "tidemark_answer_budget_waits_total") == 1
	})
	if answered, _, _ := h.state(); answered != 1 {
		t.Fatalf("%d answers handed to gRPC; the budget holds one", answered)
	}
	h.grant([]uint32{1, 3})
	resp := &replicationv1.ReplicaFetchResponse{}
	waitFor(t, 20*time.Second, "the replica fetch answered", func() bool { return h.message(3, resp) })
	if len(resp.GetPartitions()) != 1 || len(resp.GetPartitions()[0].GetRecords()) < 250_000 {
		t.Fatalf("replica fetch answer %d partitions, want records", len(resp.GetPartitions()))
	}
	if n := len(resp.GetPartitions()[0].GetRecords()); n > budget {
		t.Fatalf("replica fetch answered %d bytes of records, more than the budget of %d", n, budget)
	}
}

// A fetch parked for records holds no budget: the connection's other
// fetches go on, and the parked one is answered when records come.
func TestAParkedFetchHoldsNoAnswerBudget(t *testing.T) {
	c := newClusterFn(t, 1, nil, func(cfg *broker.Config) { cfg.MaxQueuedAnswerBytes = 300_000 })
	c.ctrl.createTopic("p", 1, 1, nil)
	value := strings.Repeat("v", 250_000)
	for range 4 {
		if _, err := c.produce("p", 0, 1, value); err != nil {
			t.Fatal(err)
		}
	}
	parked := make(chan *brokerv1.FetchResponse, 1)
	go func() {
		resp, err := c.client(1).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "p", Offset: 4, MinBytes: 1, MaxWaitMs: 60_000})
		if err != nil {
			t.Error(err)
		}
		parked <- resp
	}()
	if got := len(c.consume("p", 0)); got != 4 { // on the same connection
		t.Fatalf("consumed %d records, want 4", got)
	}
	if _, err := c.produce("p", 0, 1, "last"); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-parked:
		if len(resp.GetRecords()) != 1 || string(resp.GetRecords()[0].GetValue()) != "last" {
			t.Fatalf("the parked fetch answered %v", resp.GetRecords())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the parked fetch was not answered")
	}
}

// A Follow stream's answer over its connection's budget waits for room
// as well, then reads again what fits.
func TestAFollowAnswerOverTheAnswerBudgetWaitsForRoom(t *testing.T) {
	const budget = 1 << 20
	c := newClusterFn(t, 1, nil, func(cfg *broker.Config) {
		cfg.MaxQueuedAnswerBytes = budget
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	c.ctrl.createTopic("f", 1, 1, nil)
	value := strings.Repeat("v", 250_000)
	for range 8 {
		if _, err := c.produce("f", 0, 1, value); err != nil {
			t.Fatal(err)
		}
	}
	metrics := c.brokers[1].MetricsAddr()
	h := dialH2(t, c.cfgs[1].Listen)
	h.fetch(t, 1, &brokerv1.FetchRequest{Topic: "f", Offset: 0, MaxBytes: 1 << 20, RawBatches: true})
	waitFor(t, 20*time.Second, "the fetch answered, unread", func() bool { answered, _, _ := h.state(); return answered == 1 })
	h.call(t, 3, brokerv1.BrokerService_Follow_FullMethodName, &brokerv1.FollowRequest{Topic: "f", Offset: 4, MaxBytes: 1 << 20, RawBatches: true}, true)
	waitFor(t, 20*time.Second, "the follow waiting for room", func() bool {
		if answered, _, _ := h.state(); answered > 1 {
			t.Fatalf("%d answers handed to gRPC; the budget holds one", answered)
		}
		return metricValue(t, scrape(t, metrics), "tidemark_answer_budget_waits_total") == 1
	})
	if answered, _, _ := h.state(); answered != 1 {
		t.Fatalf("%d answers handed to gRPC; the budget holds one", answered)
	}
	h.grant([]uint32{1, 3})
	resp := &brokerv1.FollowResponse{}
	waitFor(t, 20*time.Second, "the follow answered", func() bool { return h.message(3, resp) })
	if n := len(resp.GetFetch().GetRecordBatches()); n < 250_000 || n > budget {
		t.Fatalf("follow answered %d bytes of records, want at least a batch and at most the budget", n)
	}
}

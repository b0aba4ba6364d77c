package kafkaapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/connlimit"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// serve runs a Server without a broker behind it (only ApiVersions can be
// answered) on a loopback port.
func serve(t *testing.T, limits Limits) (*Server, string) {
	t.Helper()
	s := New(Options{Limits: limits})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, lis.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// frame encodes a request as a client does: size, header v1 or v2, body.
func frame(req kmsg.Request, corr int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readAnswer reads one response frame: correlation id and the rest.
func readAnswer(t *testing.T, c net.Conn) (int32, []byte, error) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

func apiVersions(v int16) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.SetVersion(v)
	r.ClientSoftwareName, r.ClientSoftwareVersion = "test", "1"
	return r
}

// ApiVersions (the flexible v3 clients start with) lists exactly the table,
// every version range sane.
func TestApiVersionsListsTheTable(t *testing.T) {
	s, addr := serve(t, Limits{})
	c := dial(t, addr)
	if _, err := c.Write(frame(apiVersions(3), 7)); err != nil {
		t.Fatal(err)
	}
	corr, body, err := readAnswer(t, c)
	if err != nil || corr != 7 {
		t.Fatalf("answer %d, %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(body); err != nil { // v0 response header: no tags before the body
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(s.table) {
		t.Fatalf("error %d, %d keys, want %d", resp.ErrorCode, len(resp.ApiKeys), len(s.table))
	}
	for _, k := range resp.ApiKeys {
		if k.MinVersion > k.MaxVersion || k.MaxVersion > kmsg.RequestForKey(k.ApiKey).MaxVersion() {
			t.Fatalf("%s: [%d, %d] beyond what kmsg encodes", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion)
		}
	}
	// Consumer-group APIs are not advertised until a coordinator serves them.
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.FindCoordinator) || k.ApiKey == int16(kmsg.JoinGroup) {
			t.Fatalf("%s advertised without a group coordinator", kmsg.NameForKey(k.ApiKey))
		}
	}
}

// An ApiVersions newer than the listener's is answered at v0 with
// UNSUPPORTED_VERSION and the list, so the client can downgrade.
func TestApiVersionsTooNewIsAnsweredAtV0(t *testing.T) {
	_, addr := serve(t, Limits{})
	c := dial(t, addr)
	req := apiVersions(4) // above the advertised 3
	if _, err := c.Write(frame(req, 9)); err != nil {
		t.Fatal(err)
	}
	_, body, err := readAnswer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 35 || len(resp.ApiKeys) == 0 {
		t.Fatalf("error %d with %d keys, want 35 with the list", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// Pipelined requests on one connection are answered in the order sent.
func TestPipelinedAnswersKeepOrder(t *testing.T) {
	_, addr := serve(t, Limits{MaxInFlight: 2})
	c := dial(t, addr)
	var all []byte
	for i := range 20 {
		all = append(all, frame(apiVersions(int16(i%4)), int32(100+i))...)
	}
	if _, err := c.Write(all); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		corr, _, err := readAnswer(t, c)
		if err != nil || corr != int32(100+i) {
			t.Fatalf("answer %d: correlation %d, %v", i, corr, err)
		}
	}
}

// What Kafka closes a connection for closes it here, and the listener
// keeps serving the next connection.
func TestBadFramesCloseTheConnection(t *testing.T) {
	_, addr := serve(t, Limits{MaxRequestBytes: 4096})
	unknown := frame(apiVersions(3), 1)
	binary.BigEndian.PutUint16(unknown[4:], 999) // api key 999
	oldMeta := kmsg.NewPtrMetadataRequest()
	oldMeta.SetVersion(0) // below the advertised range
	garbage := frame(apiVersions(3), 1)
	garbage = append(garbage[:len(garbage)-3], 0xff, 0xff, 0xff)
	cases := map[string][]byte{
		"oversized":             binary.BigEndian.AppendUint32(nil, 4097),
		"negative size":         binary.BigEndian.AppendUint32(nil, 0xffffffff),
		"shorter than a header": append(binary.BigEndian.AppendUint32(nil, 3), 0, 18, 0),
		"unknown api key":       unknown,
		"unsupported version":   frame(oldMeta, 1),
		"undecodable body":      garbage,
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			if _, _, err := readAnswer(t, c); !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("got %v, want the connection closed", err)
			}
			// The listener is still there.
			c2 := dial(t, addr)
			if _, err := c2.Write(frame(apiVersions(3), 2)); err != nil {
				t.Fatal(err)
			}
			if corr, _, err := readAnswer(t, c2); err != nil || corr != 2 {
				t.Fatalf("next connection: %d, %v", corr, err)
			}
		})
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

// A connection that sends nothing is closed after connections.max.idle.
func TestIdleConnectionIsClosed(t *testing.T) {
	_, addr := serve(t, Limits{IdleTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	if _, _, err := readAnswer(t, c); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("got %v, want the idle connection closed", err)
	}
}

// A connection's idle time counts from its last answer, as Kafka counts
// it from the last bytes sent or received: a request in flight longer
// than connections.max.idle (a long poll, a JoinGroup waiting for a
// rebalance) leaves the client a whole idle period after its answer.
// Before, the deadline ran from the last check made while the request was
// in flight, so the connection could close a moment after the answer, and
// the client's next request met a closed connection (librdkafka consumers
// whose fetch.wait.max.ms was above it were cut after their long polls).
func TestIdleTimeCountsFromTheLastAnswer(t *testing.T) {
	s := New(Options{Extension: slowGroups{delay: 1500 * time.Millisecond},
		Limits: Limits{IdleTimeout: time.Second, MaxRequestBytes: 1 << 20}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	c := dial(t, lis.Addr().String())
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(2)
	fc.CoordinatorKey = "g"
	if _, err := c.Write(frame(fc, 1)); err != nil {
		t.Fatal(err)
	}
	// In flight 1.5 s: the deadline passed at 1 s and was moved on.
	if corr, _, err := readAnswer(t, c); err != nil || corr != 1 {
		t.Fatalf("FindCoordinator: correlation %d, %v", corr, err)
	}
	answered := time.Now()
	time.Sleep(700 * time.Millisecond) // well within an idle period of the answer
	if _, err := c.Write(frame(apiVersions(0), 2)); err != nil {
		t.Fatalf("the connection closed %s after its answer: %v", time.Since(answered), err)
	}
	if corr, _, err := readAnswer(t, c); err != nil || corr != 2 {
		t.Fatalf("ApiVersions sent %s after the last answer: correlation %d, %v; want it answered", time.Since(answered), corr, err)
	}
}

// fuzzGroups advertises the group coordinator's APIs (kafkagroups'), so
// the decoder is fuzzed over them too; it answers nothing.
type fuzzGroups struct{}

func (fuzzGroups) APIs() map[int16]VersionRange {
	return map[int16]VersionRange{int16(kmsg.FindCoordinator): {0, 4}, int16(kmsg.JoinGroup): {4, 9}, int16(kmsg.SyncGroup): {0, 5},
		int16(kmsg.Heartbeat): {0, 4}, int16(kmsg.LeaveGroup): {0, 5}, int16(kmsg.OffsetCommit): {2, 8}, int16(kmsg.OffsetFetch): {1, 8},
		int16(kmsg.ListGroups): {0, 4}, int16(kmsg.DescribeGroups): {0, 5}, int16(kmsg.DeleteGroups): {0, 2}, int16(kmsg.OffsetDelete): {0, 0}}
}

func (fuzzGroups) Handle(context.Context, identity.Principal, kmsg.Request) kmsg.Response { return nil }

// The decoder never panics, whatever the bytes: it answers, or refuses
// with an error (which closes the connection). The seeds are every served
// API at its lowest and highest version, as a client encodes them.
func FuzzDecodeRequest(f *testing.F) {
	s := New(Options{LogDirs: func() []LogDir { return nil }, Extension: fuzzGroups{}})
	for key, a := range s.table {
		for _, v := range []int16{a.versions.Min, a.versions.Max} {
			r := kmsg.RequestForKey(key)
			r.SetVersion(v)
			f.Add(frame(r, 1)[4:])
		}
	}
	f.Add(frame(apiVersions(9), 1)[4:]) // too new: answered at v0
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	c := s.newConn(nil, Listener{})
	f.Fuzz(func(t *testing.T, body []byte) {
		p, _, req, err := c.decode(body)
		if err == nil && p == nil {
			t.Fatal("no error and nothing to answer")
		}
		if err == nil && p.frame == nil && req == nil {
			t.Fatal("a request to run without a request")
		}
	})
}

// max.connections.per.ip applies to the Kafka listener: the connection over
// the limit is closed unread, the ones within it are served.
func TestConnectionsPerIPAreLimited(t *testing.T) {
	_, addr := serve(t, Limits{MaxConnectionsPerIP: 1})
	first := dial(t, addr)
	if _, err := first.Write(frame(apiVersions(3), 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, first); err != nil {
		t.Fatal(err)
	}
	second := dial(t, addr)
	_, _ = second.Write(frame(apiVersions(3), 2))
	if _, _, err := readAnswer(t, second); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("second connection from one address: %v, want it closed", err)
	}
}

// A client reconnecting in a loop past max.connections.per.ip is counted
// each time but warned about once per connlimit.RefusedWarnEvery: it cannot
// flood the log.
func TestRefusedConnectionsAreWarnedOncePerAddress(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	s := New(Options{Registry: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)), Limits: Limits{MaxConnectionsPerIP: 1}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	addr := lis.Addr().String()
	first := dial(t, addr)
	if _, err := first.Write(frame(apiVersions(3), 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, first); err != nil {
		t.Fatal(err)
	}
	const attempts = 5
	for i := range attempts {
		extra := dial(t, addr)
		_, _ = extra.Write(frame(apiVersions(3), int32(i+2)))
		if _, _, err := readAnswer(t, extra); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("connection over the limit: %v, want it closed", err)
		}
		extra.Close()
	}
	if n := testutil.ToFloat64(s.metrics.closed.WithLabelValues("refused")); n != attempts {
		t.Fatalf("refused connections counted %v, want %d", n, attempts)
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Fatalf("%d warnings for %d refusals within %v, want 1:\n%s", n, attempts, connlimit.RefusedWarnEvery, logs)
	}
}

// The listener counts requests by API and the connections it closes.
func TestMetricsCountRequestsAndClosedConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(Options{Registry: reg})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	c := dial(t, lis.Addr().String())
	if _, err := c.Write(frame(apiVersions(3), 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, 0xffffffff)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, c); err == nil {
		t.Fatal("the connection survived a negative size")
	}
	if n := testutil.ToFloat64(s.metrics.requests.WithLabelValues("ApiVersions")); n != 1 {
		t.Fatalf("ApiVersions counted %v times", n)
	}
	if n := testutil.ToFloat64(s.metrics.closed.WithLabelValues("protocol")); n != 1 {
		t.Fatalf("protocol closes counted %v", n)
	}
}

// A transactional producer is refused at InitProducerId: tidemark has no
// transaction coordinator (and advertises none of the transaction APIs).
func TestTransactionalInitProducerIDIsRefused(t *testing.T) {
	_, addr := serve(t, Limits{})
	c := dial(t, addr)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	txn := "txn-1"
	req.TransactionalID = &txn
	if _, err := c.Write(frame(req, 5)); err != nil {
		t.Fatal(err)
	}
	_, body, err := readAnswer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(4)
	if err := resp.ReadFrom(body[1:]); err != nil { // flexible: an empty tag section leads
		t.Fatal(err)
	}
	if resp.ErrorCode != int16(kerr.InvalidRequest) || resp.ProducerID != -1 {
		t.Fatalf("error %d, producer id %d; want INVALID_REQUEST and none", resp.ErrorCode, resp.ProducerID)
	}
}

// A request's buffer grows with the bytes that arrive, not with its size
// field: a client that claims the largest request and sends a header
// only, then leaves, costs the broker what it sent. The buffer was the
// claimed size at once (100 MiB per connection at the default limit).
func TestAClaimedSizeIsNotAllocatedBeforeItsBytesArrive(t *testing.T) {
	const claimed = 64 << 20
	_, addr := serve(t, Limits{MaxRequestBytes: claimed})
	c := dial(t, addr)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	head := frame(apiVersions(3), 1)[:14] // the size field and a header's start
	binary.BigEndian.PutUint32(head, claimed)
	if _, err := c.Write(head); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, c); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("got %v, want the truncated request to close the connection", err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got >= claimed/4 {
		t.Fatalf("the broker allocated %d bytes for a request of %d bytes claiming %d", got, len(head)-4, claimed)
	}
}

// readBody returns exactly the frame's bytes, however they arrive, and
// tells a frame cut short from one never begun.
func TestReadBodyAcrossChunks(t *testing.T) {
	want := bytes.Repeat([]byte("tidemark"), 3*firstBodyChunk/8+5)
	got, err := readBody(iotest.OneByteReader(bytes.NewReader(want)), len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want the %d sent", len(got), err, len(want))
	}
	if _, err := readBody(bytes.NewReader(want[:firstBodyChunk]), len(want)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a frame cut at a chunk's end: %v, want unexpected EOF", err)
	}
	if _, err := readBody(bytes.NewReader(nil), len(want)); !errors.Is(err, io.EOF) {
		t.Fatalf("no bytes: %v, want EOF", err)
	}
}

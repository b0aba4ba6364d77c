package kafkaapi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// The decoder never panics, whatever the bytes: it answers, or refuses
// with an error (which closes the connection).
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []kmsg.Request{apiVersions(0), apiVersions(3), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrCreateTopicsRequest()} {
		if r.GetVersion() == 0 && r.Key() != int16(kmsg.ApiVersions) {
			r.SetVersion(r.MaxVersion())
		}
		f.Add(frame(r, 1)[4:])
	}
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	s := New(Options{})
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

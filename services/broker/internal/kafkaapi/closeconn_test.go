package kafkaapi

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker/internal/replica"
)

// heldConn is a socket whose Close is entered (closing) and then held
// until release: the moment a closing connection has ended its context
// and not yet its socket.
type heldConn struct {
	net.Conn
	writes           atomic.Int32
	closing, release chan struct{}
}

func newHeldConn() *heldConn {
	return &heldConn{closing: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldConn) Write(b []byte) (int, error) {
	h.writes.Add(1)
	return len(b), nil
}

func (h *heldConn) SetWriteDeadline(time.Time) error { return nil }

func (h *heldConn) Close() error {
	close(h.closing)
	<-h.release
	return nil
}

// Nothing is written once the connection is closing, even an answer
// already done and a socket not yet closed: it answers a request after
// the one that closed the connection (an acks=0 write that failed), which
// Kafka never reads. Before, the writer chose at random between the done
// answer and the ended context, and wrote the answer to the socket still
// open (the door's cluster test saw it under load).
func TestNothingIsWrittenOnceTheConnectionIsClosing(t *testing.T) {
	s := New(Options{})
	for i := range 64 { // the old writer got it right half the time
		nc := newHeldConn()
		c := s.newConn(nc, Listener{})
		closer := &pending{done: make(chan struct{})} // still running
		after := &pending{done: make(chan struct{}), frame: []byte("answer")}
		close(after.done)
		c.queue <- closer
		c.queue <- after
		close(c.queue)
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			c.close()
		}()
		<-nc.closing
		c.writeLoop()
		close(nc.release)
		<-closed
		if n := nc.writes.Load(); n != 0 {
			t.Fatalf("attempt %d: %d answers written after the connection began to close", i, n)
		}
	}
}

// A Produce with acks=0 whose write failed closes the connection after the
// answers before it, with no answer and no effect for any request after
// it, as Kafka, which reads a connection's next request only once it is
// done with the last: an earlier ApiVersions is answered; a later
// ApiVersions is not, and a later acks=0 write to the partition this
// broker leads is not appended. Before, the requests after it ran (the
// write appended) while the connection closed, and an answer to one of
// them could reach the client first.
func TestFailedAcksZeroProduceClosesTheConnectionAfterEarlierAnswers(t *testing.T) {
	s := withLeader(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	produce := func(partition int32) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(7)
		req.Acks, req.TimeoutMillis = 0, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = partition, oneRecordBatch()
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		return req
	}
	r, _ := s.opts.RM.Replica(replica.TP{Topic: "t", Partition: 0})

	// An acks=0 write that succeeds: the connection stays, the request
	// after it is answered.
	c := dial(t, lis.Addr().String())
	if _, err := c.Write(append(frame(produce(0), 1), frame(apiVersions(0), 2)...)); err != nil {
		t.Fatal(err)
	}
	if corr, _, err := readAnswer(t, c); err != nil || corr != 2 {
		t.Fatalf("after a write that succeeded: answer %d, %v; want ApiVersions' (2)", corr, err)
	}
	if leo := r.Log().LogEndOffset(); leo != 1 {
		t.Fatalf("log end %d after one acks=0 write, want 1", leo)
	}

	// t-7 does not exist: the write fails.
	for i := range 16 {
		c := dial(t, lis.Addr().String())
		var b []byte
		for j, req := range []kmsg.Request{apiVersions(0), produce(7), produce(0), apiVersions(0)} {
			b = append(b, frame(req, int32(j+1))...)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if corr, _, err := readAnswer(t, c); err != nil || corr != 1 {
			t.Fatalf("attempt %d: answer %d, %v; want the first ApiVersions' (1)", i, corr, err)
		}
		if corr, _, err := readAnswer(t, c); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("attempt %d: answer %d after the failed acks=0 write (%v), want the connection closed", i, corr, err)
		}
		if leo := r.Log().LogEndOffset(); leo != 1 {
			t.Fatalf("attempt %d: log end %d, want 1: the write after the failed one was appended", i, leo)
		}
	}
}

// An all-topics Metadata that closes the connection (a fenced broker, or
// one with no metadata yet) lets no request after it run: the next one
// starts only once the Metadata is done, as Kafka reads a connection's
// next request only then. Before, every request but a produce or fetch
// let the next start at once, so an acks=0 write pipelined behind it was
// appended while the connection closed.
func TestRequestsAfterAClosingMetadataDoNotRun(t *testing.T) {
	s := withLeader(t)
	gate := make(chan struct{})
	meta := s.table[int16(kmsg.Metadata)]
	meta.handle = func(_ context.Context, rc *reqCtx, _ kmsg.Request) kmsg.Response {
		<-gate // long enough for a request behind it to run, if it may
		rc.closeConn.Store(true)
		return nil
	}
	s.table[int16(kmsg.Metadata)] = meta
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	write := kmsg.NewPtrProduceRequest()
	write.SetVersion(7)
	write.Acks, write.TimeoutMillis = 0, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = oneRecordBatch()
	rt.Partitions = append(rt.Partitions, p)
	write.Topics = append(write.Topics, rt)
	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(7)
	r, _ := s.opts.RM.Replica(replica.TP{Topic: "t", Partition: 0})

	c := dial(t, lis.Addr().String())
	if _, err := c.Write(append(frame(all, 1), frame(write, 2)...)); err != nil {
		t.Fatal(err)
	}
	// The old code appended the write within this second; the new one
	// never does, so the second passes whole.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if leo := r.Log().LogEndOffset(); leo != 0 {
			t.Fatalf("the write behind a Metadata still running was appended (log end %d)", leo)
		}
	}
	close(gate)
	if corr, _, err := readAnswer(t, c); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("answer %d after the closing Metadata (%v), want the connection closed", corr, err)
	}
	if leo := r.Log().LogEndOffset(); leo != 0 {
		t.Fatalf("log end %d after the connection closed: the write behind the closing Metadata ran", leo)
	}
}

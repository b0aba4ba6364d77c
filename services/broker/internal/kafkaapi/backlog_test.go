package kafkaapi

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A client that pipelines many fetches at once and reads no answers holds
// at most kafka.max.queued.answer.bytes plus one answer in the broker: the
// connection is read no further and its next request does not start until
// the client reads. Before, every request in flight (up to 32 by default)
// built its answer, each up to fetch.max.bytes. Once the client reads, every
// answer comes, in order, and the backlog is gone.
func TestUnreadAnswersAreBoundedPerConnection(t *testing.T) {
	const (
		answer   = 1 << 20
		bound    = 2 << 20
		inFlight = 64
		sent     = 96
	)
	s := New(Options{Limits: Limits{MaxInFlight: inFlight, MaxQueuedAnswerBytes: bound}})
	batch := make([]byte, answer)
	var built atomic.Int32
	fetch := s.table[int16(kmsg.Fetch)]
	fetch.handle = func(_ context.Context, _ *reqCtx, req kmsg.Request) kmsg.Response {
		built.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = batch
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	s.table[int16(kmsg.Fetch)] = fetch
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	c := dial(t, lis.Addr().String())

	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 50<<20, -1
	var all []byte
	for i := range sent {
		all = append(all, frame(req, int32(i))...)
	}
	if _, err := c.Write(all); err != nil {
		t.Fatal(err)
	}
	// Until the broker stops building answers: what the sockets' buffers
	// took is written (how much depends on the host), the rest waits.
	last, since := int32(-1), time.Now()
	for deadline := time.Now().Add(15 * time.Second); time.Since(since) < 500*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if n := built.Load(); n != last {
			last, since = n, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("answers still being built after 15 s (%d)", last)
		}
	}
	queued := testutil.ToFloat64(s.metrics.queued)
	t.Logf("%d of %d answers built, %.0f bytes queued", last, sent, queued)
	if queued >= bound+answer+1024 {
		t.Fatalf("%.0f bytes of answers queued for a client that reads none, want below %d (the bound plus one answer)", queued, bound+answer)
	}

	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range sent {
		corr, body, err := readAnswer(t, c)
		if err != nil || corr != int32(i) || len(body) < answer {
			t.Fatalf("answer %d: correlation %d, %d bytes, %v", i, corr, len(body), err)
		}
	}
	if n := built.Load(); n != sent {
		t.Fatalf("%d answers built, want %d", n, sent)
	}
	// The last Write returns a moment after the client has its bytes.
	for deadline := time.Now().Add(5 * time.Second); testutil.ToFloat64(s.metrics.queued) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%.0f bytes still counted queued after every answer was read", testutil.ToFloat64(s.metrics.queued))
		}
	}
}

package client_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
)

// produceMany sends n numbered records to partition 0 of topic t and waits
// for every callback.
func produceMany(t *testing.T, p *client.Producer, n int) *outcomes {
	t.Helper()
	out := newOutcomes(t, n)
	for i := range n {
		p.ProduceAsync(client.Record{Topic: "t", Value: value(i), ManualPartition: true}, out.cb(i))
	}
	out.wait(15 * time.Second)
	return out
}

func values(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = value(i)
	}
	return out
}

// checkAllDelivered asserts that every record succeeded at the offset equal
// to its number, i.e. the log is the records in order, each once.
func checkAllDelivered(t *testing.T, fc *fakebroker.Cluster, out *outcomes) {
	t.Helper()
	for i, r := range out.res {
		if out.errs[i] != nil {
			t.Fatalf("record %d failed: %v", i, out.errs[i])
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, r.Offset)
		}
	}
	checkLog(t, fc, "t", 0, values(len(out.res)))
}

func TestLeaderMovesMidStream(t *testing.T) {
	for _, hint := range []bool{true, false} {
		name := map[bool]string{true: "with hint", false: "without hint"}[hint]
		t.Run(name, func(t *testing.T) {
			fc := startCluster(t, fakebroker.Config{Brokers: 2})
			fc.CreateTopic("t", 1, 1, 2)
			fc.SetLeaderHints(hint)
			c := newClient(t, fc)
			p := newProducer(t, c, client.ProducerOptions{Linger: time.Millisecond, BatchSize: 256})
			var moved atomic.Bool
			fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
				if call.Method != "Produce" {
					return nil
				}
				if call.N == 10 && moved.CompareAndSwap(false, true) {
					fc.MoveLeader("t", 0, 2)
				}
				return &fakebroker.Fault{Delay: time.Duration(rand.IntN(3)) * time.Millisecond}
			})
			out := produceMany(t, p, 500)
			checkAllDelivered(t, fc, out)
			if fc.NodeCalls(2, "Produce") == 0 {
				t.Fatal("nothing was sent to the new leader")
			}
			metadataCalls := fc.Calls("Metadata")
			if hint && metadataCalls != 1 {
				t.Fatalf("%d metadata requests; the leader hint should have saved the refresh", metadataCalls)
			}
			if !hint && metadataCalls < 2 {
				t.Fatalf("%d metadata requests; without a hint the leader must be looked up", metadataCalls)
			}
			if last := out.res[499].LeaderEpoch; last != 1 {
				t.Fatalf("last record written in leader epoch %d, want 1", last)
			}
		})
	}
}

func TestIdempotentRetriesKeepOrderWithFiveInFlight(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: time.Millisecond, BatchSize: 200})
	// Random waits after the append keep several requests in flight and
	// answer them out of order; some requests time out after the append,
	// some are refused before it.
	var timedOut, refused atomic.Int32
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method != "Produce" {
			return nil
		}
		f := &fakebroker.Fault{Wait: time.Duration(rand.IntN(15)) * time.Millisecond}
		switch {
		case call.N%7 == 3:
			f.Code, f.AfterAppend = kerr.RequestTimedOut, true
			timedOut.Add(1)
		case call.N%11 == 5:
			f.Code = kerr.NotEnoughReplicas
			refused.Add(1)
		}
		return f
	})
	out := produceMany(t, p, 1500)
	checkAllDelivered(t, fc, out)
	if got := fc.MaxInFlight("t", 0); got != client.DefaultMaxInFlight {
		t.Fatalf("at most %d produce requests were in flight, want %d", got, client.DefaultMaxInFlight)
	}
	// Overtaking and retries are handled within one producer epoch.
	if n := fc.Calls("InitProducerId"); n != 1 {
		t.Fatalf("InitProducerId called %d times, want 1", n)
	}
	if timedOut.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("faults injected: %d timeouts after append, %d refusals", timedOut.Load(), refused.Load())
	}
	t.Logf("%d requests for %d batches; %d timed out after append, %d refused",
		fc.Calls("Produce"), fc.BatchCount("t", 0), timedOut.Load(), refused.Load())
}

func TestTimeoutAfterAppendIsNotDuplicated(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1})
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" && call.N == 1 {
			return &fakebroker.Fault{Code: kerr.RequestTimedOut, AfterAppend: true}
		}
		return nil
	})
	res, err := p.Produce(testCtx(t, 5*time.Second), client.Record{Topic: "t", Value: value(0)})
	if err != nil || res.Offset != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if n := fc.Calls("Produce"); n != 2 {
		t.Fatalf("%d produce calls, want 2", n)
	}
	checkLog(t, fc, "t", 0, values(1))
}

func TestNonIdempotentRetryDuplicates(t *testing.T) {
	// The contrast that shows what idempotence buys: without it, a retry
	// after a timeout that followed the append writes the record twice.
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1, Idempotence: client.IdempotenceOff})
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" && call.N == 1 {
			return &fakebroker.Fault{Code: kerr.RequestTimedOut, AfterAppend: true}
		}
		return nil
	})
	if _, err := p.Produce(testCtx(t, 5*time.Second), client.Record{Topic: "t", Value: value(0)}); err != nil {
		t.Fatal(err)
	}
	checkLog(t, fc, "t", 0, [][]byte{value(0), value(0)})
}

func TestDeliveryTimeoutCallsBackEveryRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(fc *fakebroker.Cluster)
	}{
		{"refused", func(fc *fakebroker.Cluster) {
			fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
				if call.Method == "Produce" {
					return &fakebroker.Fault{Code: kerr.NotEnoughReplicas}
				}
				return nil
			})
		}},
		{"no answer", func(fc *fakebroker.Cluster) {
			fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
				if call.Method == "Produce" {
					return &fakebroker.Fault{Delay: time.Minute}
				}
				return nil
			})
		}},
		{"broker down", func(fc *fakebroker.Cluster) { fc.StopBroker(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := startCluster(t, fakebroker.Config{})
			fc.CreateTopic("t", 1)
			c := newClient(t, fc)
			const delivery = 400 * time.Millisecond
			p := newProducer(t, c, client.ProducerOptions{
				Linger: 5 * time.Millisecond, BatchSize: 100,
				DeliveryTimeout: delivery, RequestTimeout: 150 * time.Millisecond,
			})
			if _, err := c.Metadata(testCtx(t, time.Second), "t"); err != nil {
				t.Fatal(err)
			}
			tc.fault(fc)
			const n = 60
			out := newOutcomes(t, n)
			sent := make([]time.Time, n)
			for i := range n {
				sent[i] = time.Now()
				p.ProduceAsync(client.Record{Topic: "t", Value: value(i)}, out.cb(i))
				if i%20 == 19 {
					time.Sleep(50 * time.Millisecond)
				}
			}
			out.wait(10 * time.Second)
			for i := range n {
				if out.errs[i] == nil {
					t.Fatalf("record %d succeeded", i)
				}
				if c := out.res[i].Code; c != kerr.RequestTimedOut {
					t.Fatalf("record %d: code %v (%v), want REQUEST_TIMED_OUT", i, c, out.errs[i])
				}
				// The clock starts when the record's batch opens (Kafka's
				// createdMs). A batch that waits behind unsent ones keeps
				// filling, across the pause too, so a record may join one
				// opened by an earlier record: 100 bytes hold at most two
				// of these (61-byte header, 18-19 bytes a record), so the
				// batch opened no earlier than the record before.
				opener := max(i-1, 0)
				if waited := out.at[i].Sub(sent[opener]); waited < delivery-10*time.Millisecond {
					t.Fatalf("record %d failed %v after record %d was sent, before delivery.timeout.ms %v", i, waited, opener, delivery)
				}
			}
		})
	}
}

func TestOutOfOrderSequenceRestartsUnderNewEpoch(t *testing.T) {
	// The leader lost the producer's state: the head batch is refused with
	// OUT_OF_ORDER_SEQUENCE_NUMBER. The producer bumps its epoch itself
	// (KIP-360), restarts the sequence and resends, as Kafka's does.
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1})
	ctx := testCtx(t, 5*time.Second)
	if _, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(0)}); err != nil {
		t.Fatal(err)
	}
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" && call.N == 2 {
			return &fakebroker.Fault{Code: kerr.OutOfOrderSequenceNumber}
		}
		return nil
	})
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(1)}); err != nil || res.Offset != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	checkLog(t, fc, "t", 0, values(2))
	checkEpochBump(t, fc, "t", 0)
}

func TestFatalBatchFailsAloneAndLaterBatchesGoOn(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: time.Millisecond, BatchSize: 200})
	var failed atomic.Int32
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method != "Produce" {
			return nil
		}
		f := &fakebroker.Fault{Delay: time.Duration(rand.IntN(10)) * time.Millisecond}
		if call.N == 20 {
			f.Code = kerr.InvalidRecord
			failed.Add(1)
		}
		return f
	})
	const n = 400
	out := produceMany(t, p, n)
	var want [][]byte
	bad := 0
	for i := range n {
		switch code := out.res[i].Code; code {
		case kerr.None:
			want = append(want, value(i))
		case kerr.InvalidRecord:
			bad++
		default:
			t.Fatalf("record %d: %v", i, out.errs[i])
		}
	}
	if bad == 0 || bad > 10 {
		t.Fatalf("%d records failed with INVALID_RECORD, want one batch of them", bad)
	}
	got := checkLog(t, fc, "t", 0, want)
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Fatalf("offset %d", r.Offset)
		}
	}
	checkEpochBump(t, fc, "t", 0)
}

// A final answer to InitProducerId (a principal without IdempotentWrite)
// fails the waiting records with that answer at once, as Kafka's producer
// does, instead of retrying until delivery.timeout.ms; once the cause is
// gone, later records go through.
func TestFinalProducerIDRefusalFailsRecordsAtOnce(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1, DeliveryTimeout: 30 * time.Second})
	var refuse atomic.Bool
	refuse.Store(true)
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "InitProducerId" && refuse.Load() {
			return &fakebroker.Fault{Code: kerr.ClusterAuthorizationFailed}
		}
		return nil
	})
	ctx := testCtx(t, 20*time.Second)
	_, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(0)})
	if codeOf(err) != kerr.ClusterAuthorizationFailed {
		t.Fatalf("produce while InitProducerId is refused: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if n := fc.Calls("Produce"); n != 0 {
		t.Fatalf("%d produce calls without a producer id", n)
	}
	refuse.Store(false)
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(1)}); err != nil || res.Offset != 0 {
		t.Fatalf("produce once allowed: %+v %v", res, err)
	}
}

// A leader that stops answering produce requests (its connection stays up)
// is looked up again once a request times out, so the records go to the
// broker that took the leadership over within the delivery timeout.
func TestProducerLeavesALeaderThatStopsAnswering(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("t", 1, 1, 2)
	fc.SetLeaderHints(false)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{Linger: -1, RequestTimeout: 300 * time.Millisecond, DeliveryTimeout: 4 * time.Second})
	ctx := testCtx(t, 10*time.Second)
	if _, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(0), ManualPartition: true}); err != nil {
		t.Fatal(err)
	}
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Node == 1 && call.Method == "Produce" {
			return &fakebroker.Fault{Delay: time.Hour}
		}
		return nil
	})
	fc.MoveLeader("t", 0, 2)
	res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(1), ManualPartition: true})
	if err != nil || res.Offset != 1 {
		t.Fatalf("produce after the leader stopped answering: %+v, %v", res, err)
	}
	checkLog(t, fc, "t", 0, values(2))
}

// lostStateAfterUnansweredAttempt makes the second produce request time out
// (appended first when appended is set: its answer was lost) and the leader
// answer the resend UNKNOWN_PRODUCER_ID, as a leader that forgot the
// producer meanwhile does; fetchFault, when set, refuses every fetch.
func lostStateAfterUnansweredAttempt(fc *fakebroker.Cluster, appended bool, fetchFault kerr.Code) {
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		switch {
		case call.Method == "Produce" && call.N == 2:
			return &fakebroker.Fault{Code: kerr.RequestTimedOut, AfterAppend: appended}
		case call.Method == "Produce" && call.N == 3:
			return &fakebroker.Fault{Code: kerr.UnknownProducerID}
		case call.Method == "Fetch" && fetchFault != kerr.None:
			return &fakebroker.Fault{Code: fetchFault}
		}
		return nil
	})
}

// producerAfterOneWrite is a producer of topic t on a fake cluster whose
// first write (value 0, offset 0) is acknowledged.
func producerAfterOneWrite(t *testing.T) (*fakebroker.Cluster, *client.Producer, context.Context) {
	t.Helper()
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	p := newProducer(t, newClient(t, fc), client.ProducerOptions{Linger: -1})
	ctx := testCtx(t, 10*time.Second)
	if _, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(0)}); err != nil {
		t.Fatal(err)
	}
	return fc, p, ctx
}

func TestUnknownProducerAfterALostAnswerFindsTheBatchInTheLog(t *testing.T) {
	// The batch was appended and its answer lost; the leader then refuses
	// the resend as from an unknown producer. A new epoch would write it
	// again: the producer finds it in the log and reports its offset.
	fc, p, ctx := producerAfterOneWrite(t)
	lostStateAfterUnansweredAttempt(fc, true, kerr.None)
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(1)}); err != nil || res.Offset != 1 {
		t.Fatalf("the write whose answer was lost: %+v %v; want offset 1", res, err)
	}
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(2)}); err != nil || res.Offset != 2 {
		t.Fatalf("the next write: %+v %v; want offset 2", res, err)
	}
	// The fake did not really forget the producer: its sequence goes on.
	checkLog(t, fc, "t", 0, values(3))
}

func TestUnknownProducerAfterAnUnansweredAttemptResendsAnUnwrittenBatch(t *testing.T) {
	// The same, but the first attempt timed out before the append: the
	// log does not hold the batch, and it is resent under a new epoch
	// (as before the log was searched).
	fc, p, ctx := producerAfterOneWrite(t)
	lostStateAfterUnansweredAttempt(fc, false, kerr.None)
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(1)}); err != nil || res.Offset != 1 {
		t.Fatalf("the write whose attempt went unanswered: %+v %v; want offset 1", res, err)
	}
	checkLog(t, fc, "t", 0, values(2))
	checkEpochBump(t, fc, "t", 0)
}

func TestUnknownProducerAfterALostAnswerFailsWhenTheLogCannotBeRead(t *testing.T) {
	// The log cannot be searched (fetches refused): the write fails with
	// the leader's error, saying it may or may not have been written, and
	// is not written again; the next write goes on under a new epoch.
	fc, p, ctx := producerAfterOneWrite(t)
	lostStateAfterUnansweredAttempt(fc, true, kerr.TopicAuthorizationFailed)
	_, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(1)})
	if codeOf(err) != kerr.UnknownProducerID || !strings.Contains(err.Error(), "may or may not have been written") {
		t.Fatalf("the write whose answer was lost: %v; want UNKNOWN_PRODUCER_ID saying it may have been written", err)
	}
	t.Log(err)
	if res, err := p.Produce(ctx, client.Record{Topic: "t", Value: value(2)}); err != nil || res.Offset != 2 {
		t.Fatalf("the next write: %+v %v; want offset 2", res, err)
	}
	checkLog(t, fc, "t", 0, values(3))
	checkEpochBump(t, fc, "t", 0)
}

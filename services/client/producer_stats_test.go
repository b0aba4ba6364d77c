package client_test

import (
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// With every request held for 100 ms after its append (an acks=-1 wait)
// and one request in flight, batches queue for the slot: the stats count
// them and their queue time; with nothing held, none waits.
func TestStatsCountBatchesThatWaitedForARequestSlot(t *testing.T) {
	const held = 100 * time.Millisecond
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)

	p := newProducer(t, c, client.ProducerOptions{MaxInFlight: 1, BatchSize: 1, Linger: 0})
	if st := p.Stats(); st != (client.ProducerStats{}) {
		t.Fatalf("a new producer's stats: %+v", st)
	}
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" {
			return &fakebroker.Fault{Wait: held}
		}
		return nil
	})
	const n = 4
	out := newOutcomes(t, n)
	for i := range n {
		p.ProduceAsync(client.Record{Topic: "t", Value: value(i)}, out.cb(i))
	}
	out.wait(10 * time.Second)
	st := p.Stats()
	// batch.size 1: a batch per record. The first goes at once (after the
	// producer id); each later one waits for the one before it.
	if st.Batches != n || st.SlotWaits != n-1 {
		t.Fatalf("%d batches of one record, one request slot: %+v", n, st)
	}
	if st.QueueTimeMax < (n-1)*held || st.QueueTime < (1+2+3)*held {
		t.Fatalf("the last batch waited for three held requests: %+v", st)
	}
	if again := p.Stats(); again.QueueTimeMax != 0 || again.Batches != n {
		t.Fatalf("Stats starts a new maximum and keeps the counts: %+v", again)
	}

	fc.SetControl(nil)
	q := newProducer(t, c, client.ProducerOptions{})
	for i := range n {
		if _, err := q.Produce(testCtx(t, 10*time.Second), client.Record{Topic: "t", Value: value(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if st := q.Stats(); st.Batches != n || st.SlotWaits != 0 {
		t.Fatalf("one synchronous record at a time never waits for a slot: %+v", st)
	}
}

package client_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// A batch waiting to fill while buffer.memory is spent waits for nothing:
// no record can join it until an answer frees room. As Kafka's accumulator
// does, the producer sends it then instead of after linger.ms, so the
// window holds every byte buffer.memory allows in flight.
func TestOpenBatchGoesWhenBufferMemoryIsSpent(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	const (
		valueSize = 100
		perRecord = 64 + valueSize // what a record is charged (memSize)
		// The first request's answer is held until the second arrives,
		// or for this long (as acks=-1 waits for the HW): a second that
		// waits for the first's answer comes only after it.
		answerIn = 10 * time.Second
	)
	// Room for 50 records: one batch of 4 KiB (about 36 of them) and part
	// of a second.
	p := newProducer(t, c, client.ProducerOptions{Linger: time.Minute, BatchSize: 4096, BufferMemory: 50 * perRecord})
	ctx := testCtx(t, 20*time.Second)
	val := func(i int) []byte { return fmt.Appendf(bytes.Repeat([]byte{'x'}, valueSize-6), "%06d", i) }
	// One record first, so the producer id is settled and the idempotent
	// producer may have several requests in flight.
	p.ProduceAsync(client.Record{Topic: "t", Value: val(0)}, func(client.Result, error) {})
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	arrived := 0
	second := make(chan struct{}) // closed when the second request arrives
	var heldOut atomic.Bool       // the first's answer went before the second arrived
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method != "Produce" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		arrived++
		switch arrived {
		case 1:
			time.AfterFunc(answerIn, func() {
				select {
				case <-second:
				default:
					heldOut.Store(true)
				}
			})
			return &fakebroker.Fault{Wait: answerIn, Until: second}
		case 2:
			close(second)
		}
		return nil
	})
	const n = 120
	out := newOutcomes(t, n)
	go func() {
		for i := range n {
			// Blocks while buffer.memory is spent.
			p.ProduceAsync(client.Record{Topic: "t", Value: val(i + 1)}, out.cb(i))
		}
		// The last batch has room left and a minute of linger.
		_ = p.Flush(ctx)
	}()
	out.wait(15 * time.Second)
	for i, err := range out.errs {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if arrived < 2 {
		t.Fatalf("%d produce requests", arrived)
	}
	// The first batch filled and went; the second, partly filled when the
	// room ran out, must go at once and not only once the first's answer
	// freed room for more records.
	if heldOut.Load() {
		t.Fatal("the second request came only after the first was answered: the partly filled batch waited for room instead of going when buffer.memory ran out")
	}
	want := [][]byte{val(0)}
	for i := range n {
		want = append(want, val(i+1))
	}
	checkLog(t, fc, "t", 0, want)
}

package client_test

import (
	"bytes"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// A broker that stops reading its produce stream (stalled, its flow-control
// window full) must not hold Close past its deadline: Close cancels the
// requests, but a writer blocked in stream.Send is only released when the
// stream is cut.
func TestCloseDeadlineWithAStreamWhoseWindowIsFull(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 3)
	c := newClient(t, fc)
	p, err := client.NewProducer(c, client.ProducerOptions{Linger: -1, Idempotence: client.IdempotenceOff, MaxInFlight: 5})
	if err != nil {
		t.Fatal(err)
	}
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" {
			return &fakebroker.Fault{Delay: 2 * time.Minute}
		}
		return nil
	})
	big := bytes.Repeat([]byte("x"), 1<<20)
	const n = 15
	out := newOutcomes(t, n)
	for i := range n {
		p.ProduceAsync(client.Record{Topic: "t", Partition: int32(i % 3), ManualPartition: true, Value: big}, out.cb(i))
	}
	time.Sleep(500 * time.Millisecond) // the requests go out; the window fills
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- p.Close(testCtx(t, 300*time.Millisecond)) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Close with a 300ms deadline still running after %v", time.Since(start))
	}
	out.wait(time.Second)
}

package client_test

import (
	"sync"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
)

// A leader that stops answering on the produce stream: the attempt times
// out after request.timeout.ms, and since nothing at all came back on the
// stream since it was sent, the client cuts the stream (as Kafka's client
// disconnects on a request timeout) and the retry goes out on a new one,
// instead of queueing behind the stalled stream until delivery.timeout.ms.
func TestStalledProduceStreamIsReplaced(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" && call.N == 1 {
			return &fakebroker.Fault{Delay: time.Minute} // until the stream is cut
		}
		return nil
	})
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{RequestTimeout: 300 * time.Millisecond, DeliveryTimeout: 20 * time.Second})
	start := time.Now()
	res, err := p.Produce(testCtx(t, 20*time.Second), client.Record{Topic: "t", Value: []byte("v")})
	if err != nil {
		t.Fatalf("produce behind a stalled stream: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("delivered after %s: the retry waited behind the stalled stream", took)
	}
	if n := fc.Calls("ProduceStream"); n != 2 {
		t.Fatalf("%d produce streams opened, want 2 (the stalled one cut, one new)", n)
	}
	if res.Offset != 0 || len(fc.Records("t", 0)) != 1 {
		t.Fatalf("offset %d, log %v: want the record once at 0", res.Offset, fc.Records("t", 0))
	}
}

// A stream the broker ends (here at once, with BROKER_NOT_AVAILABLE, as a
// stopping broker does) says nothing about the requests waiting on it: they
// fail with a retriable NETWORK_EXCEPTION and go again on a new stream.
func TestEndedProduceStreamIsRetriedOnANewOne(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "ProduceStream" && call.N == 1 {
			return &fakebroker.Fault{Code: kerr.BrokerNotAvailable}
		}
		return nil
	})
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{RequestTimeout: 2 * time.Second, DeliveryTimeout: 20 * time.Second})
	res, err := p.Produce(testCtx(t, 20*time.Second), client.Record{Topic: "t", Value: []byte("v")})
	if err != nil {
		t.Fatalf("produce on a stream the broker ended: %v", err)
	}
	if n := fc.Calls("ProduceStream"); n != 2 {
		t.Fatalf("%d produce streams opened, want 2", n)
	}
	if res.Offset != 0 || len(fc.Records("t", 0)) != 1 {
		t.Fatalf("offset %d, log %v: want the record once at 0", res.Offset, fc.Records("t", 0))
	}
}

// Every broker refusing metadata with BROKER_NOT_AVAILABLE and produce
// with NOT_LEADER_OR_FOLLOWER, as they do while each has fenced itself as
// leader (etcd out of reach), is a cluster that will answer again: the
// producer keeps its records and retries within delivery.timeout.ms, for a
// topic it knows and one it has not seen yet. Before, the metadata's
// BROKER_NOT_AVAILABLE (final, as Kafka has it) failed them at once.
func TestProducerWaitsWhileEveryBrokerIsFenced(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("known", 1)
	fc.CreateTopic("new", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{RequestTimeout: 2 * time.Second, DeliveryTimeout: 30 * time.Second})
	if _, err := p.Produce(testCtx(t, 10*time.Second), client.Record{Topic: "known", Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fencedUntil := time.Now().Add(2 * time.Second)
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		mu.Lock()
		defer mu.Unlock()
		if time.Now().After(fencedUntil) {
			return nil
		}
		switch call.Method {
		case "Metadata":
			return &fakebroker.Fault{Code: kerr.BrokerNotAvailable}
		case "Produce", "ProduceStream":
			return &fakebroker.Fault{Code: kerr.NotLeaderOrFollower, NoHint: true}
		}
		return nil
	})
	var wg sync.WaitGroup
	for _, topic := range []string{"known", "new"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Produce(testCtx(t, 30*time.Second), client.Record{Topic: topic, Value: []byte("during")}); err != nil {
				t.Errorf("produce to %s while every broker is fenced: %v", topic, err)
			}
		}()
	}
	wg.Wait()
	if time.Now().Before(fencedUntil) {
		t.Fatal("delivered while every broker refused")
	}
	if got := len(fc.Records("known", 0)) + len(fc.Records("new", 0)); got != 3 {
		t.Fatalf("%d records in the logs, want 3", got)
	}
}

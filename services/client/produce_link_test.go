package client_test

import (
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

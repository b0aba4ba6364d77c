package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// A synchronous Produce given up on (its context ended first) leaves its
// record to be answered later; that late answer must not reach the calls
// made after it, each of which returns its own record's offset.
func TestProduceGivenUpOnDoesNotAnswerTheNextOne(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	held := make(chan struct{})
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Produce" && call.N == 2 {
			close(held)
			// Answered well after the caller has given up on it.
			return &fakebroker.Fault{Wait: 500 * time.Millisecond}
		}
		return nil
	})
	p := newProducer(t, newClient(t, fc), client.ProducerOptions{Linger: -1})
	ctx := context.Background()
	first, err := p.Produce(ctx, client.Record{Topic: "t", Value: []byte("0")})
	if err != nil {
		t.Fatal(err)
	}

	gaveUp, cancel := context.WithCancel(ctx)
	go func() { <-held; cancel() }()
	if _, err := p.Produce(gaveUp, client.Record{Topic: "t", Value: []byte("1")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("the held produce returned %v, want its context's end", err)
	}

	for i := range int64(3) {
		res, err := p.Produce(ctx, client.Record{Topic: "t", Value: []byte("next")})
		if err != nil {
			t.Fatal(err)
		}
		if want := first.Offset + 2 + i; res.Offset != want {
			t.Fatalf("produce %d after the one given up on returned offset %d, want %d (its own)", i, res.Offset, want)
		}
	}
}

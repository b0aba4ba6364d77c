package client

import (
	"context"
	"math"
	"testing"
	"time"

	"tidemark.io/services/client/internal/fakebroker"
)

// The epoch is bumped without a broker until it is exhausted; then the
// producer asks for a fresh id, at epoch 0 (Kafka's idempotent producer).
func TestProducerEpochBumpsLocallyUntilExhausted(t *testing.T) {
	fc, err := fakebroker.Start(fakebroker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	c, err := New(fc.BrokerAddrs(), Options{RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ids := newProducerIDs(c)
	first, err := ids.next(ctx, noIdentity)
	if err != nil || first.pid < 1 || first.epoch != 0 {
		t.Fatalf("first identity %+v %v, want a fresh id at epoch 0", first, err)
	}
	bumped, err := ids.next(ctx, first)
	if err != nil || bumped != (identity{pid: first.pid, epoch: 1}) {
		t.Fatalf("bump of %+v gave %+v %v, want the same id at epoch 1", first, bumped, err)
	}
	// A partition still on the first identity moves to the current one.
	if got, _ := ids.next(ctx, first); got != bumped {
		t.Fatalf("a second partition done with %+v got %+v, want %+v", first, got, bumped)
	}
	if n := fc.Calls("InitProducerId"); n != 1 {
		t.Fatalf("InitProducerId called %d times, want 1", n)
	}
	ids.mu.Lock()
	ids.cur.epoch = math.MaxInt16
	last := ids.cur
	ids.mu.Unlock()
	fresh, err := ids.next(ctx, last)
	if err != nil || fresh.pid == first.pid || fresh.epoch != 0 {
		t.Fatalf("after exhausting epochs of %+v got %+v %v, want a fresh id at epoch 0", last, fresh, err)
	}
	if n := fc.Calls("InitProducerId"); n != 2 {
		t.Fatalf("InitProducerId called %d times, want 2", n)
	}
}

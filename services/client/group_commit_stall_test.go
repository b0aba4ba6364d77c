package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// The coordinator stalls on OffsetCommit with its connection up: the
// auto-commit in flight holds the commit order for up to the API timeout.
// Poll goes on delivering what the healthy leader serves (the auto-commit
// due meanwhile is skipped, not waited for), and CommitSync and Close give
// up with their context. Before, every Poll with an auto-commit due waited
// for the one in flight, far beyond its own context, and so did CommitSync
// and Close.
func TestGroupConsumerPollsOnWhileACommitIsStalled(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	appendEach(fc, 1, 3)
	o := testOptions()
	o.APITimeout = time.Minute
	o.RequestTimeout = 30 * time.Second
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "OffsetCommit" {
			return &fakebroker.Fault{Delay: time.Minute}
		}
		return nil
	})
	go1 := groupOptions("g")
	go1.AutoCommitInterval = 10 * time.Millisecond
	gc, err := client.NewGroupConsumer(c, go1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gc.Abandon)

	read := 0
	eventually(t, "the first records read", func() bool {
		recs, _ := pollWithin(t, gc, 10*time.Second)
		read += len(recs)
		return read == 3
	})
	// The Poll after the records starts an auto-commit, which stalls.
	eventually(t, "an auto-commit held by the coordinator", func() bool {
		_, _ = pollWithin(t, gc, 10*time.Second)
		return fc.Calls("OffsetCommit") > 0
	})
	appendEach(fc, 1, 2) // offsets 3 and 4, served by the healthy leader
	var more []client.Record
	eventually(t, "the records written during the stall", func() bool {
		recs, err := pollWithin(t, gc, 10*time.Second)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("poll during the stall: %v", err)
		}
		more = append(more, recs...)
		return len(more) == 2
	})
	if more[0].Offset != 3 || more[1].Offset != 4 {
		t.Fatalf("read offsets %d, %d during the stall, want 3, 4", more[0].Offset, more[1].Offset)
	}
	if n := fc.Calls("OffsetCommit"); n != 1 {
		t.Fatalf("%d OffsetCommit calls, want the one held: a later commit overtook it", n)
	}
	ctx := testCtx(t, time.Second)
	done := make(chan error, 1)
	go func() { done <- gc.CommitSync(ctx, nil) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CommitSync behind a stalled commit: %v, want its context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CommitSync(1 s) behind a stalled commit has not returned after 10 s")
	}
	ctx = testCtx(t, time.Second)
	go func() { done <- gc.Close(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close behind a stalled commit: %v, want its context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close(1 s) behind a stalled commit has not returned after 10 s")
	}
}

// pollWithin runs Poll with a 1 s context and fails the test when it has
// not returned within limit.
func pollWithin(t *testing.T, gc *client.GroupConsumer, limit time.Duration) ([]client.Record, error) {
	t.Helper()
	type result struct {
		recs []client.Record
		err  error
	}
	ctx := testCtx(t, time.Second)
	done := make(chan result, 1)
	go func() {
		recs, err := gc.Poll(ctx)
		done <- result{recs, err}
	}()
	select {
	case r := <-done:
		return r.recs, r.err
	case <-time.After(limit):
		t.Fatalf("Poll(1 s) has not returned after %v", limit)
		return nil, nil
	}
}

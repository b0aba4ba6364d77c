package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// groupCalls is a dial option that reports every GroupService call of the
// given method as it returns, with its error.
func groupCalls(method string, returned func(err error)) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, full string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, full, req, reply, cc, opts...)
			if strings.HasSuffix(full, "/"+method) {
				returned(err)
			}
			return err
		})
}

// joinedGroup starts a member of group g with manual commits and waits
// until the group is stable with it.
func joinedGroup(t *testing.T, fc *fakebroker.Cluster, c *client.Client) *client.GroupConsumer {
	t.Helper()
	o := groupOptions("g")
	o.DisableAutoCommit = true
	o.RebalanceTimeout = time.Minute // the test does not call Poll
	gc, err := client.NewGroupConsumer(c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gc.Abandon)
	eventually(t, "the member in the group", func() bool {
		state, generation, _ := fc.GroupState("g")
		return state == "Stable" && generation > 0 && gc.Generation() == generation
	})
	return gc
}

type commitOutcome struct {
	offsets map[client.TopicPartition]int64
	err     error
}

// commitAsyncWithin calls CommitAsync and fails the test when it has not
// returned within limit; the callback's outcome arrives on the channel.
func commitAsyncWithin(t *testing.T, gc *client.GroupConsumer, offsets map[client.TopicPartition]int64, limit time.Duration) <-chan commitOutcome {
	t.Helper()
	out := make(chan commitOutcome, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		gc.CommitAsync(offsets, func(offs map[client.TopicPartition]int64, err error) { out <- commitOutcome{offs, err} })
	}()
	select {
	case <-returned:
	case <-time.After(limit):
		t.Fatalf("CommitAsync has not returned after %v", limit)
	}
	return out
}

func awaitOutcome(t *testing.T, what string, ch <-chan commitOutcome) commitOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no callback after 15 s", what)
		return commitOutcome{}
	}
}

// The coordinator holds the first OffsetCommit: CommitAsync calls made
// meanwhile return at once and are sent, folded into one commit, after
// it, each callback hearing the outcome. Before, CommitAsync waited for
// the commit in flight on the caller's goroutine.
func TestCommitAsyncNeverWaitsForTheCommitInFlight(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 2)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the cluster closes
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "OffsetCommit" && call.N == 1 {
			<-release
		}
		return nil
	})
	o := testOptions()
	o.APITimeout = time.Minute
	o.RequestTimeout = 30 * time.Second
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	gc := joinedGroup(t, fc, c)
	p0, p1 := client.TopicPartition{Topic: "t", Partition: 0}, client.TopicPartition{Topic: "t", Partition: 1}

	first := commitAsyncWithin(t, gc, map[client.TopicPartition]int64{p0: 1}, 10*time.Second)
	eventually(t, "the first commit held by the coordinator", func() bool { return fc.Calls("OffsetCommit") == 1 })
	second := commitAsyncWithin(t, gc, map[client.TopicPartition]int64{p0: 2, p1: 5}, 10*time.Second)
	third := commitAsyncWithin(t, gc, map[client.TopicPartition]int64{p0: 3}, 10*time.Second)

	release <- struct{}{}
	for i, ch := range []<-chan commitOutcome{first, second, third} {
		if got := awaitOutcome(t, "commit", ch); got.err != nil {
			t.Fatalf("commit %d: %v", i+1, got.err)
		}
	}
	if got := fc.Committed("g", "t", 0); got != 3 {
		t.Fatalf("t-0 committed at %d, want the newest, 3", got)
	}
	if got := fc.Committed("g", "t", 1); got != 5 {
		t.Fatalf("t-1 committed at %d, want 5", got)
	}
	if n := fc.Calls("OffsetCommit"); n != 2 {
		t.Fatalf("%d OffsetCommit calls, want 2 (the two queued behind the first fold into one)", n)
	}
}

// An auto-commit held by a stalled coordinator is abandoned when Close
// gives up (its ctx ended), not left running to the API timeout, and the
// CommitAsync queued behind it is told ErrClosed; commits asked for after
// Close are refused with ErrClosed. Before, the commit ran
// on under context.Background for a minute, and a CommitAsync after Close
// waited for it, then sent its commit.
func TestGroupConsumerCloseEndsTheCommitInFlight(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	appendEach(fc, 1, 3)
	commitEnded := make(chan error, 16)
	o := testOptions()
	o.APITimeout = time.Minute
	o.RequestTimeout = 30 * time.Second
	o.DialOptions = append(o.DialOptions, groupCalls("OffsetCommit", func(err error) { commitEnded <- err }))
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
	eventually(t, "the records read", func() bool {
		recs, _ := pollWithin(t, gc, 10*time.Second)
		read += len(recs)
		return read == 3
	})
	eventually(t, "an auto-commit held by the coordinator", func() bool {
		_, _ = pollWithin(t, gc, 10*time.Second)
		return fc.Calls("OffsetCommit") > 0
	})
	queued := commitAsyncWithin(t, gc, map[client.TopicPartition]int64{{Topic: "t", Partition: 0}: 3}, 10*time.Second)

	if err := gc.Close(testCtx(t, time.Second)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close behind a stalled commit: %v, want its context's deadline", err)
	}
	select {
	case err := <-commitEnded:
		if status.Code(err) != codes.Canceled {
			t.Fatalf("the commit in flight ended with %v, want cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the auto-commit in flight still runs 10 s after Close returned")
	}

	if got := awaitOutcome(t, "CommitAsync queued behind the stalled commit", queued); !errors.Is(got.err, client.ErrClosed) {
		t.Fatalf("CommitAsync queued when Close gave up: %v, want ErrClosed", got.err)
	}
	after := commitAsyncWithin(t, gc, map[client.TopicPartition]int64{{Topic: "t", Partition: 0}: 3}, 10*time.Second)
	if got := awaitOutcome(t, "CommitAsync after Close", after); !errors.Is(got.err, client.ErrClosed) {
		t.Fatalf("CommitAsync after Close: %v, want ErrClosed", got.err)
	}
	if err := gc.CommitSync(testCtx(t, time.Second), nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("CommitSync after Close: %v, want ErrClosed", err)
	}
	if n := fc.Calls("OffsetCommit"); n != 1 {
		t.Fatalf("%d OffsetCommit calls, want only the auto-commit", n)
	}
}

// The group waits for a member that joins after the API timeout but within
// the rebalance timeout: the members already waiting in JoinGroup stay
// there. Before, their JoinGroup was cut off at the API timeout (and sent
// again), as if the group could not form.
func TestJoinGroupWaitsTheRebalanceTimeoutBeyondTheAPITimeout(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 2)
	const apiTimeout = time.Second
	var mu sync.Mutex
	var joinErrs []error
	o := testOptions()
	o.APITimeout = apiTimeout
	o.DialOptions = append(o.DialOptions, groupCalls("JoinGroup", func(err error) {
		if c := status.Code(err); c == codes.DeadlineExceeded || c == codes.Canceled {
			mu.Lock()
			joinErrs = append(joinErrs, err)
			mu.Unlock()
		}
	}))
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	go1 := groupOptions("g")
	go1.RebalanceTimeout = 6 * apiTimeout
	go1.SessionTimeout = 3 * apiTimeout

	// The late member: eager, it joins the next rebalance only after its
	// user's Poll has revoked its partitions.
	late, err := client.NewGroupConsumer(c, go1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(late.Abandon)
	eventually(t, "the first member's assignment", func() bool {
		_, _ = pollWithin(t, late, 10*time.Second)
		return len(late.Assignment()) == 2
	})
	early := startPolling(t, c, go1)
	eventually(t, "the rebalance the second member started", func() bool {
		state, _, _ := fc.GroupState("g")
		return state == "PreparingRebalance"
	})
	time.Sleep(apiTimeout + apiTimeout/2) // the first member keeps the group waiting past the API timeout
	eventually(t, "one partition each", func() bool {
		_, _ = pollWithin(t, late, 10*time.Second)
		return len(late.Assignment()) == 1 && len(early.gc.Assignment()) == 1
	})
	if late.Generation() != early.gc.Generation() {
		t.Fatalf("generations %d and %d", late.Generation(), early.gc.Generation())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(joinErrs) > 0 {
		t.Fatalf("%d JoinGroup calls given up while the group waited for its late member: %v", len(joinErrs), joinErrs)
	}
}

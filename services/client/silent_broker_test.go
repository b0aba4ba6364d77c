package client_test

import (
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// A broker that stops answering (stalled, as a frozen process is) is asked
// last once a call to it went unanswered: the group calls that follow
// find their coordinator through the brokers that answer, instead of
// giving the silent one a whole request timeout a third of the time (the
// members of a group whose coordinator froze lost their sessions so).
func TestASilentBrokerIsAskedLast(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 3})
	fc.CreateTopic("t", 1)
	o := testOptions()
	o.RequestTimeout = 200 * time.Millisecond
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Metadata(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	fc.MoveCoordinator(2)
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Node == 1 {
			return &fakebroker.Fault{Delay: time.Minute}
		}
		return nil
	})
	const calls = 30
	for i := range calls {
		if _, err := c.GroupOffsets(testCtx(t, 10*time.Second), "g", client.TopicPartition{Topic: "t"}); err != nil {
			t.Fatalf("offsets %d: %v", i, err)
		}
	}
	// The first call may try broker 1 before it is known to be silent.
	if n := fc.NodeCalls(1, "FindCoordinator"); n > 1 {
		t.Fatalf("the silent broker 1 was asked for the coordinator %d times in %d calls, want at most once", n, calls)
	}
}

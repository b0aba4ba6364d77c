package replica

import (
	"strings"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// The leader's replication throttle (KIP-73): once the throttled bytes
// exceed leader.replication.throttled.rate, a listed partition is answered
// without records to a follower outside the ISR, never to one in it; when
// the rate falls back the follower gets records again.
func TestLeaderThrottleHoldsOnlyFollowersOutsideTheISR(t *testing.T) {
	e := newEnv(t)
	req := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		Controller: &commonv1.Node{Id: 100, Address: ctrlAddr},
		BrokerConfigs: map[string]string{"leader.replication.throttled.rate": "100",
			"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "1"}}
	for _, id := range []int32{1, 2, 3} {
		req.Brokers = append(req.Brokers, &controlv1.BrokerRegistration{
			Node: &commonv1.Node{Id: id, Address: brokerAddr(id)}, BrokerEpoch: brokerEpochs[id]})
	}
	if err := e.m.UpdateMetadata(req); err != nil {
		t.Fatal(err)
	}
	e.state(1, 1, 1, []int32{1, 2}, map[string]string{"leader.replication.throttled.replicas": "0:1"})
	// Follower 3's fetches propose it into the ISR; the controller leaves
	// that change in flight, so 3 stays outside the committed ISR (which is
	// what the throttle looks at) for the whole test.
	hold := make(chan struct{})
	e.ctrl.mu.Lock()
	e.ctrl.hold = hold
	e.ctrl.mu.Unlock()
	t.Cleanup(func() { close(hold) })
	value := strings.Repeat("x", 500)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch(value), 0); err != nil {
		t.Fatal(err)
	}
	// Nothing measured yet: the out-of-sync follower gets the records,
	// and they count (about 570 bytes in a 1 s window: over 100 B/s).
	if a := e.followerFetch(3, 1, 0); len(a.Records) == 0 || a.Held {
		t.Fatalf("first fetch of follower 3: %+v", a)
	}
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch(value), 0); err != nil {
		t.Fatal(err)
	}
	if a := e.followerFetch(3, 1, 1); len(a.Records) != 0 || !a.Held {
		t.Fatalf("follower 3 over the rate got %d bytes (held %t)", len(a.Records), a.Held)
	}
	// The ISR member is never held back, rate or not.
	if a := e.followerFetch(2, 1, 0); len(a.Records) == 0 || a.Held {
		t.Fatalf("follower 2 (in the ISR) held: %+v", a)
	}
	// Its bytes counted too; once the samples age out, follower 3 is
	// served again.
	e.clock.Advance(3 * time.Second)
	if a := e.followerFetch(3, 1, 1); len(a.Records) == 0 || a.Held {
		t.Fatalf("follower 3 after the window: %+v", a)
	}
	// An unlisted partition is never held.
	e.stateOf(TP{Topic: "t", Partition: 1}, 1, 1, 1, []int32{1, 2}, map[string]string{"leader.replication.throttled.replicas": "0:1"})
	if _, err := e.m.Produce(t.Context(), TP{Topic: "t", Partition: 1}, 1, batch(value), 0); err != nil {
		t.Fatal(err)
	}
	if a := e.followerFetchOf(TP{Topic: "t", Partition: 1}, 3, 1, 0); len(a.Records) == 0 || a.Held {
		t.Fatalf("unlisted partition held: %+v", a)
	}
}

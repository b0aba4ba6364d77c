package replica

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
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

// throttleRates sends m an UpdateMetadata listing brokers 1-3 with the
// given broker configs (the replication throttle rates and windows).
func (e *env) throttleRates(m *Manager, configs map[string]string) {
	e.t.Helper()
	req := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		Controller: &commonv1.Node{Id: 100, Address: ctrlAddr}, BrokerConfigs: configs}
	for _, id := range []int32{1, 2, 3} {
		req.Brokers = append(req.Brokers, &controlv1.BrokerRegistration{
			Node: &commonv1.Node{Id: id, Address: brokerAddr(id)}, BrokerEpoch: brokerEpochs[id]})
	}
	if err := m.UpdateMetadata(req); err != nil {
		e.t.Fatal(err)
	}
}

// fetchesOf reports whether req carries tp, and at which offset.
func fetchesOf(req *replicationv1.ReplicaFetchRequest, tp TP) (int64, bool) {
	off, ok := fetchOffsets(req)[tp]
	return off, ok
}

// The follower's throttle (KIP-73) holds back only a replica that is not in
// sync, which Kafka measures as lag = leader HW - LEO on answers that bring
// records (and on the first of a leader epoch): an answer without records,
// such as one the leader's own throttle held, leaves it as it was. Broker
// 2 caught up to the HW with its first answer; the leader then holds its
// next fetch (2 is outside the ISR and the leader is over its rate) and
// answers it empty with a HW past broker 2's LEO. Broker 2 is over its own
// rate too, and still fetches the partition: the leader decides.
func TestFollowerThrottleIgnoresAnswersWithoutRecords(t *testing.T) {
	e := newEnv(t)
	n := newTapNet(e.net)
	n.hold = func(resp *replicationv1.ReplicaFetchResponse) bool {
		for _, p := range resp.GetPartitions() {
			if p.GetTopic() == tp0.Topic && p.GetPartition() == tp0.Partition && len(p.GetRecords()) > 0 {
				return true
			}
		}
		return false
	}
	m2 := e.followerOver(n)
	windows := map[string]string{"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "1"}
	leaderRates, followerRates := map[string]string{"leader.replication.throttled.rate": "100"}, map[string]string{"follower.replication.throttled.rate": "100"}
	maps.Copy(leaderRates, windows)
	maps.Copy(followerRates, windows)
	e.throttleRates(e.m, leaderRates)
	e.throttleRates(m2, followerRates)
	throttled := map[string]string{"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "0:2"}
	e.state(1, 1, 1, []int32{1}, throttled)
	value := strings.Repeat("x", 500)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch(value), 0); err != nil {
		t.Fatal(err)
	}
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1}, throttled)
	select {
	case <-n.held: // the answer with the record: both sides now over 100 B/s
	case <-time.After(10 * time.Second):
		t.Fatal("no answer with t-0's record")
	}
	// A second record before broker 2 asks past the first: its next fetch
	// is behind the HW, so the leader does not add it to the ISR.
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch(value), 0); err != nil {
		t.Fatal(err)
	}
	sent := len(n.requests())
	close(n.release)
	held := n.waitRequest(t, "a fetch of t-0 at 1", sent, func(r *replicationv1.ReplicaFetchRequest) bool {
		off, ok := fetchesOf(r, tp0)
		return ok && off == 1
	})
	// The leader parks a fetch it holds for a throttled partition at most
	// the follower's throttle pause; then answers it empty, HW 2.
	e.clock.WaitTimer(t, throttleBackoff, 1)
	e.clock.Advance(throttleBackoff)
	n.waitRequest(t, "broker 2 to fetch t-0 again while over its rate", held+1, func(r *replicationv1.ReplicaFetchRequest) bool {
		off, ok := fetchesOf(r, tp0)
		return ok && off == 1
	})
	if _, follower := m2.ReplicationRates(); follower <= 100 {
		t.Fatalf("broker 2's throttled rate %.0f B/s: not over the limit, the test shows nothing", follower)
	}
	if r, _ := m2.Replica(tp0); r.Log().LogEndOffset() != 1 {
		t.Fatalf("broker 2's LEO %d, want 1 (the leader holds the rest)", r.Log().LogEndOffset())
	}
}

// A follower in the ISR of a throttled partition keeps up however far over
// the rate its broker is, while a throttled partition it is behind on is
// held back: acks=all writes to the first commit without the clock moving
// (so without waiting for the rate to fall), and the second is not
// fetched again.
func TestFollowerThrottleHoldsOnlyReplicasBehindTheHW(t *testing.T) {
	e := newEnv(t)
	n := newTapNet(e.net)
	m2 := e.followerOver(n)
	// replica.fetch.max.bytes 600: one batch a fetch, so t-1 stays behind.
	e.throttleRates(m2, map[string]string{"follower.replication.throttled.rate": "100", "replica.fetch.max.bytes": "600",
		"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "1"})
	throttled := map[string]string{"follower.replication.throttled.replicas": "*"}
	// t-1: broker 2 outside the ISR, far behind.
	e.stateOf(tp1, 1, 1, 1, []int32{1}, throttled)
	value := strings.Repeat("x", 500)
	for range 4 {
		if _, err := e.m.Produce(t.Context(), tp1, 1, batch(value), 0); err != nil {
			t.Fatal(err)
		}
	}
	// t-0: broker 2 in the ISR.
	e.state(1, 1, 1, []int32{1, 2}, throttled)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, throttled)
	e.stateOn(m2, tp1, 1, 1, 1, []int32{1}, throttled)
	r1, _ := m2.Replica(tp1)
	// The fetcher counts a fetch's bytes against its rate after appending
	// them: wait for both.
	waitFor(t, "broker 2 to copy t-1's first records and count them", func() bool {
		_, follower := m2.ReplicationRates()
		return r1.Log().LogEndOffset() > 0 && follower > 100
	})
	if _, follower := m2.ReplicationRates(); follower <= 100 {
		t.Fatalf("broker 2's throttled rate %.0f B/s: not over the limit, the test shows nothing", follower)
	}
	behind := r1.Log().LogEndOffset()
	sent := len(n.requests())
	start := e.clock.Now()
	for i := range 5 {
		res, err := e.m.Produce(t.Context(), tp0, -1, batch(value), produceTimeout)
		if err != nil || res.BaseOffset != int64(i) {
			t.Fatalf("acks=all write %d to t-0: %+v %v", i, res, err)
		}
	}
	if now := e.clock.Now(); !now.Equal(start) {
		t.Fatalf("the clock moved by %s", now.Sub(start))
	}
	for _, r := range n.requests()[sent:] {
		if _, ok := fetchesOf(r, tp1); ok {
			t.Fatalf("t-1 (behind, over the rate) fetched: %v", fetchOffsets(r))
		}
	}
	if leo := r1.Log().LogEndOffset(); leo != behind || leo == 4 {
		t.Fatalf("t-1 on broker 2 at %d (was %d, leader at 4)", leo, behind)
	}
	if isr, pending, _ := e.isr(tp0); !slices.Equal(isr, []int32{1, 2}) || pending {
		t.Fatalf("t-0's ISR %v (change pending %t), want [1 2]", isr, pending)
	}
}

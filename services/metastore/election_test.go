package metastore

import (
	"context"
	"testing"
	"time"

	"tidemark.io/services/internal/etcdtest"
)

func TestCampaignOneWinnerThenFailover(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	a, b := newStore(t, srv.Client(t)), newStore(t, srv.Client(t))

	type result struct {
		id   int32
		sess *Session
		err  error
	}
	results := make(chan result, 2)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for id, s := range map[int32]*Store{1: a, 2: b} {
		go func() {
			sess, err := s.Campaign(cctx, id, "addr", shortTTL)
			results <- result{id, sess, err}
		}()
	}

	var first result
	select {
	case first = <-results:
	case <-time.After(5 * time.Second):
		t.Fatal("no controller elected")
	}
	if first.err != nil {
		t.Fatal(first.err)
	}
	if first.sess.Epoch() != 1 {
		t.Fatalf("first epoch = %d, want 1", first.sess.Epoch())
	}
	// The loser keeps waiting while the winner's lease lives.
	select {
	case r := <-results:
		t.Fatalf("second campaign returned while a controller was active: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	active, ok, err := a.ActiveController(ctx)
	if err != nil || !ok || active.ControllerID != first.id || active.Epoch != 1 {
		t.Fatalf("active controller = %+v %v %v", active, ok, err)
	}

	// Kill the winner's lease: the standby must win epoch 2 within the TTL.
	killed := time.Now()
	if _, err := srv.Client(t).Revoke(ctx, first.sess.Lease()); err != nil {
		t.Fatal(err)
	}
	var second result
	select {
	case second = <-results:
	case <-time.After(shortTTL):
		t.Fatalf("standby not elected within the lease TTL %s", shortTTL)
	}
	if second.err != nil {
		t.Fatal(second.err)
	}
	t.Logf("failover took %s", time.Since(killed))
	if second.id == first.id || second.sess.Epoch() != 2 {
		t.Fatalf("second winner %d epoch %d, want the other candidate at epoch 2", second.id, second.sess.Epoch())
	}
	if second.sess.EpochRevision() <= first.sess.EpochRevision() {
		t.Fatalf("epoch revision did not grow: %d then %d", first.sess.EpochRevision(), second.sess.EpochRevision())
	}
	waitClosed(t, first.sess.Done(), 10*time.Second, "old session's Done")
	_ = second.sess.Resign(ctx)
}

func TestZombieControllerIsFenced(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	bridge := srv.NewBridge(t)
	zombieStore := newStore(t, bridge.Client(t))
	rival := newStore(t, srv.Client(t))

	zombie := elect(t, ctx, zombieStore, 1, shortTTL)
	if _, err := zombie.CreateTopic(ctx, simpleTopic("orders", 2)); err != nil {
		t.Fatal(err)
	}
	rec, err := rival.PartitionState(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}

	// The zombie stalls: its keepalives stop, its lease expires, a rival wins.
	bridge.Pause()
	winner := elect(t, ctx, rival, 2, longTTL)
	if winner.Epoch() != 2 {
		t.Fatalf("rival epoch = %d, want 2", winner.Epoch())
	}
	// The rival won once etcd expired the zombie's lease, a TTL after its
	// last renewal: the zombie no longer claims to hold it, whether or not
	// its etcd client has noticed yet.
	if zombie.Held(time.Now().Add(100 * time.Millisecond)) {
		t.Error("the zombie still claims its lease after a rival was elected")
	}
	before, err := rival.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bridge.Resume()

	// Every kind of fenced write from the zombie is refused.
	writes := map[string]func() error{
		"create topic": func() error { _, err := zombie.CreateTopic(ctx, simpleTopic("payments", 1)); return err },
		"update partition": func() error {
			_, err := zombie.UpdatePartitionState(ctx, PartitionUpdate{Current: rec, Next: PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}})
			return err
		},
		"delete topic":  func() error { return zombie.DeleteTopic(ctx, "orders") },
		"topic config":  func() error { return zombie.PutTopicConfig(ctx, "orders", map[string]string{"retention.ms": "1"}) },
		"broker config": func() error { return zombie.PutBrokerConfig(ctx, DefaultBrokerEntity, map[string]string{"a": "b"}) },
		"mark deletion": func() error { return zombie.MarkTopicForDeletion(ctx, "orders") },
		"user credentials": func() error {
			return zombie.PutUserCredentials(ctx, "alice", UserCredentials{"SCRAM-SHA-256": {Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k"), Iterations: 4096}})
		},
	}
	for name, write := range writes {
		moved := wantMoved(t, write())
		if moved.Epoch != 1 || moved.CurrentEpoch != 2 || moved.Current == nil || moved.Current.ControllerID != 2 {
			t.Errorf("%s: moved error = %+v", name, moved)
		}
	}
	after, err := rival.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision != before.Revision {
		t.Fatalf("etcd changed under a zombie: revision %d -> %d", before.Revision, after.Revision)
	}
	waitClosed(t, zombie.Done(), 10*time.Second, "zombie session's Done")
}

// A session whose keepalives stall stops claiming its lease a TTL after the
// last renewal, no later than its etcd client gives it up (Done): the
// client checks its deadlines only once a second.
func TestHeldEndsNoLaterThanTheSession(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	bridge := srv.NewBridge(t)
	sess := elect(t, ctx, newStore(t, bridge.Client(t)), 1, shortTTL)
	if !sess.Held(time.Now()) {
		t.Fatal("a fresh session does not hold its lease")
	}
	bridge.Pause()
	defer bridge.Resume()
	deadline := time.Now().Add(10 * shortTTL)
	var unheld time.Time
	for time.Now().Before(deadline) {
		now := time.Now()
		if unheld.IsZero() && !sess.Held(now) {
			unheld = now
		}
		select {
		case <-sess.Done():
			if unheld.IsZero() {
				t.Fatal("the session ended while still claiming its lease")
			}
			t.Logf("no longer held %s before the session ended", time.Since(unheld).Round(time.Millisecond))
			return
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the session neither ended nor stopped holding within %s (held false since %v)", 10*shortTTL, unheld)
}

// Held counts a lease from when its newest answered renewal was sent, not
// from when the answer arrived: etcd renewed it no later than it answered,
// and an answer that arrives late (read by a process frozen after its
// request went out, or held on a one-way stall) says nothing of how long
// ago that was. Here renewals reach etcd while their answers are held,
// then the renewals stop too, then the held answers arrive: etcd can
// expire the lease a TTL after the last renewal that went out, and Held
// must not claim it past that.
func TestHeldCountsFromTheRenewalsSendTime(t *testing.T) {
	// Long enough that the session's own silence limit (a TTL without an
	// answer) is not reached before the held answers arrive.
	const ttl = 6 * time.Second
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	bridge := srv.NewBridge(t)
	sess := elect(t, ctx, newStore(t, bridge.Client(t)), 1, ttl)
	defer bridge.Resume()

	bridge.PauseWay(etcdtest.ToClient)
	time.Sleep(ttl * 5 / 12) // at least one renewal (every TTL/3) reaches etcd
	bridge.PauseWay(etcdtest.ToServer)
	lastOut := time.Now() // no renewal reaches etcd after this
	time.Sleep(ttl / 12)
	bridge.ResumeWay(etcdtest.ToClient)
	time.Sleep(300 * time.Millisecond) // the held answers arrive

	if !sess.Held(time.Now()) {
		t.Fatal("the session does not hold the lease etcd renewed less than a TTL ago")
	}
	if sess.Held(lastOut.Add(ttl)) {
		t.Fatalf("Held claims the lease a TTL after the last renewal etcd could have received")
	}
}

func TestFencedOnceLeaseIsLostEvenWithoutSuccessor(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	if _, err := srv.Client(t).Revoke(ctx, sess.Lease()); err != nil {
		t.Fatal(err)
	}
	moved := wantMoved(t, sess.PutBrokerConfig(ctx, "1", map[string]string{"k": "v"}))
	if moved.Current != nil || moved.CurrentEpoch != 1 {
		t.Fatalf("moved = %+v, want no current controller at epoch 1", moved)
	}
}

func TestResignHandsOverAtOnce(t *testing.T) {
	srv, a := startStore(t)
	ctx := testCtx(t)
	b := newStore(t, srv.Client(t))
	// A lease far longer than elect's own 5 s bound: the second election
	// can only succeed if the resign released the office, not its expiry.
	first := elect(t, ctx, a, 1, time.Minute)
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, first.Done(), time.Second, "Done after Resign")
	second := elect(t, ctx, b, 2, longTTL)
	if second.Epoch() != 2 {
		t.Fatalf("after resign: epoch %d, want 2", second.Epoch())
	}
	wantMoved(t, first.DeleteTopic(ctx, "x"))
}

func TestWatchControllerSeesElections(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	w := s.WatchController(ctx, 0)
	sess := elect(t, ctx, s, 7, longTTL)
	if err := sess.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var got []Event
	for len(got) < 2 {
		select {
		case wr := <-w:
			if wr.Err != nil {
				t.Fatal(wr.Err)
			}
			got = append(got, wr.Events...)
		case <-time.After(3 * time.Second):
			t.Fatalf("controller events = %+v", got)
		}
	}
	if got[0].Type != EventPut || got[0].Controller == nil || got[0].Controller.ControllerID != 7 ||
		got[1].Type != EventDelete || got[1].Kind != KindController {
		t.Fatalf("controller events = %+v", got)
	}
}

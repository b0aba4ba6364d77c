package metastore

import (
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
)

// TestLeaseHeldUntilIsNeverAfterTheExpiry cuts a registration's etcd
// traffic (bytes held, as a partition or a stalled process) and checks the
// broker-side bound the leader fence relies on: the key is deleted no
// earlier than LeaseHeldUntil, and the bound was at least two thirds of a
// TTL ahead while keepalives were answered.
func TestLeaseHeldUntilIsNeverAfterTheExpiry(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	bridge := srv.NewBridge(t)
	s := newStore(t, bridge.Client(t))
	direct := srv.Client(t)

	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 4, Address: "127.0.0.1:9104"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	if reg.TTL() != longTTL {
		t.Fatalf("TTL %s, want %s", reg.TTL(), longTTL)
	}
	// Healthy: renewed every third of the TTL.
	time.Sleep(longTTL)
	if ahead := time.Until(reg.LeaseHeldUntil()); ahead < longTTL/2 {
		t.Fatalf("lease held for only %s more while etcd answers", ahead)
	}

	deleted := make(chan time.Time, 1)
	wch := direct.Watch(ctx, s.k.broker(4), clientv3.WithRev(reg.Epoch()+1))
	go func() {
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					deleted <- time.Now()
					return
				}
			}
		}
	}()
	bridge.Pause()
	paused := time.Now()
	var at time.Time
	select {
	case at = <-deleted:
	case <-time.After(3 * longTTL):
		t.Fatal("the unrenewed lease did not expire")
	}
	held := reg.LeaseHeldUntil()
	t.Logf("paused at 0, held until %s, deleted at %s", held.Sub(paused).Round(time.Millisecond), at.Sub(paused).Round(time.Millisecond))
	if at.Before(held) {
		t.Fatalf("etcd deleted the key %s before LeaseHeldUntil", held.Sub(at))
	}
	// Silence alone does not give the registration up: the broker cannot
	// tell an expired lease from one etcd kept. etcd's first answer does.
	select {
	case <-reg.Done():
		t.Fatalf("the registration was given up while etcd answered nothing (%s)", reg.LostReason())
	default:
	}
	bridge.Resume()
	waitClosed(t, reg.Done(), longTTL, "Done of the expired registration once etcd answers")
	if reg.LostReason() == "" {
		t.Fatal("Done closed without a reason")
	}
}

// restartTTL is the lease of the restart tests: a restored lease must
// outlive the reconnection (at most a second apart) on a loaded machine.
const restartTTL = 4 * time.Second

// etcdRequestTimeout is how long a graceful etcd stop serves the streams
// still open at most (its request timeout, 5 s, plus two election
// timeouts; the part below is enough to tell a full drain).
const etcdRequestTimeout = 5 * time.Second

// TestRegistrationOutlivesAnEtcdRestart stops etcd for longer than the
// lease's TTL. etcd keeps leases on disk and gives each a whole TTL again
// when it starts, so the registration lives on: same lease and epoch, Done
// open, and LeaseHeldUntil ahead again once a keepalive is answered.
func TestRegistrationOutlivesAnEtcdRestart(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	bridge := srv.NewBridge(t)
	s := newStore(t, bridge.Client(t))
	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 5, Address: "127.0.0.1:9105"}, restartTTL)
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart(t, restartTTL+time.Second)
	back := time.Now()
	if time.Now().Before(reg.LeaseHeldUntil()) {
		t.Fatal("the lease counted as held through an outage of twice its TTL")
	}
	deadline := time.Now().Add(restartTTL)
	for !reg.LeaseConfirmedAt().After(back) {
		select {
		case <-reg.Done():
			t.Fatalf("registration given up across the restart: %s", reg.LostReason())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no keepalive answered within %s of etcd's return", restartTTL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := srv.Client(t).Get(ctx, s.k.broker(5))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(reg.Lease()) || resp.Kvs[0].CreateRevision != reg.Epoch() {
		t.Fatalf("registration key after the restart: %v, want lease %x epoch %d", resp.Kvs, reg.Lease(), reg.Epoch())
	}
}

// TestRegistrationOutlivesAGracefulEtcdStop dials etcd directly, so it sees
// etcd's graceful stop (SIGTERM): new calls refused at once, open streams
// served for up to the request timeout (here 5.2 s, longer than the TTL).
// Renewals on the open keepalive stream go on reaching etcd until it
// closes, so the lease is alive when it starts again. Renewing with a call
// each (KeepAliveOnce) was refused from the first moment, and etcd expired
// the lease while it drained.
//
// etcd itself may end the stream early (a renewal it fails under load,
// such as a leadership check timing out): nothing can renew the lease
// after that, so the attempt shows nothing and is made again, at most
// three times; a lease lost while the stream stayed open fails at once.
func TestRegistrationOutlivesAGracefulEtcdStop(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	s := newStore(t, srv.Client(t))
	for attempt := 1; attempt <= 3; attempt++ {
		id := int32(5 + attempt)
		reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: id, Address: fmt.Sprintf("127.0.0.1:91%02d", id)}, restartTTL)
		if err != nil {
			t.Fatal(err)
		}
		stopping := time.Now()
		srv.Restart(t, time.Second)
		t.Logf("attempt %d: etcd drained in %s, back after %s", attempt,
			srv.Stopped().Sub(stopping).Round(time.Millisecond), time.Since(stopping).Round(time.Millisecond))
		lost := awaitRenewalAfterRestart(t, reg, time.Now(), 2*restartTTL)
		if lost == "" {
			resp, err := srv.Client(t).Get(ctx, s.k.broker(id))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(reg.Lease()) {
				t.Fatalf("registration key after the restart: %v, want lease %x", resp.Kvs, reg.Lease())
			}
			return
		}
		at, why := reg.LastRenewalBreak()
		// A break well before etcd let its last stream go was etcd ending
		// the keepalive stream mid-drain, not the end of the drain; so was
		// one that ended a drain shorter than etcd's request timeout (the
		// keepalive stream was the last one open, so the drain ended with
		// it). Without a stream to hold open, every drain is that short
		// and all three attempts fail.
		drained := srv.Stopped().Sub(stopping)
		early := at.Before(srv.Stopped().Add(-100*time.Millisecond)) || drained < etcdRequestTimeout
		if at.IsZero() || at.Before(stopping) || !early {
			t.Fatalf("registration lost across a graceful stop with its keepalive stream open: %s (last stream break %s: %q)",
				lost, at.Sub(stopping).Round(time.Millisecond), why)
		}
		t.Logf("attempt %d shows nothing: etcd ended the keepalive stream %s into its drain (%s), and the registration was lost (%s)",
			attempt, at.Sub(stopping).Round(time.Millisecond), why, lost)
	}
	t.Fatal("etcd ended the keepalive stream mid-drain in all three attempts")
}

// awaitRenewalAfterRestart waits until a keepalive sent after back is
// answered (""), or the registration is lost (its reason); it fails the
// test if neither happens within limit.
func awaitRenewalAfterRestart(t *testing.T, reg *Registration, back time.Time, limit time.Duration) string {
	t.Helper()
	deadline := back.Add(limit)
	for !reg.LeaseConfirmedAt().After(back) {
		select {
		case <-reg.Done():
			return reg.LostReason()
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no keepalive answered within %s of etcd's return", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ""
}

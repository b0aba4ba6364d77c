package broker

import (
	"context"
	"testing"
	"time"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
)

func register(t *testing.T, s *metastore.Store) *metastore.Registration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := s.RegisterBroker(ctx, metastore.BrokerInfo{ID: 1, Address: "127.0.0.1:1"}, 2*time.Second, metastore.WaitForExpiry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // etcd may be cut off
		defer cancel()
		_ = reg.Close(ctx)
	})
	return reg
}

// wantFenced checks a fence and whether etcd's silence is all of its
// reason (the followers may vouch only then).
func wantFenced(t *testing.T, f *leaseFence, what string, silent bool) {
	t.Helper()
	v := f.Check()
	if kerr.CodeOf(v.Err) != kerr.NotLeaderOrFollower {
		t.Fatalf("%s: Check = %v, want NOT_LEADER_OR_FOLLOWER", what, v.Err)
	}
	if v.LeaseSilent != silent {
		t.Fatalf("%s: LeaseSilent %t, want %t (%v)", what, v.LeaseSilent, silent, v.Err)
	}
}

// TestLeaseFenceReadsTheClockAtTheCheck plays a process that stalls (its
// etcd traffic stops) and resumes just after the moment its lease could
// expire: the very first check refuses, with no background goroutine having
// had a chance to notice anything (none runs here), and before the
// registration's own Done has closed. Then the new incarnation stays fenced
// while it still holds an old leadership, until the controller's full
// LeaderAndIsr for its epoch.
func TestLeaseFenceReadsTheClockAtTheCheck(t *testing.T) {
	srv := etcdtest.Start(t)
	bridge := srv.NewBridge(t)
	s, err := metastore.New(bridge.Client(t), metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	led := 1
	f := newLeaseFence(logging.Discard(), nil, func() int { return led })
	wantFenced(t, f, "before any registration", false)

	reg := register(t, s)
	f.registered(reg, func() {})
	wantFenced(t, f, "registered while leading partitions of no confirmed epoch", false)
	f.confirm(reg.Epoch())
	if err := f.Check().Err; err != nil {
		t.Fatalf("registered and confirmed: %v", err)
	}

	bridge.Pause()
	fenceAt := reg.LeaseHeldUntil().Add(-leaseMargin(reg.TTL()))
	time.Sleep(time.Until(fenceAt.Add(-200 * time.Millisecond)))
	if err := f.Check().Err; err != nil {
		t.Fatalf("fenced %s before the margin: %v", time.Until(fenceAt), err)
	}
	time.Sleep(time.Until(fenceAt) + time.Millisecond)
	wantFenced(t, f, "just past LeaseHeldUntil - margin", true)
	select {
	case <-reg.Done():
		t.Fatal("the registration was already given up: the check did not decide on its own")
	default:
	}
	if !reg.LeaseHeldUntil().After(time.Now()) {
		t.Fatal("the fence went up only after the lease could already have expired")
	}

	// The lease ends at etcd; once etcd answers again the registration is
	// lost, and a new incarnation registers while the replica still thinks
	// it leads.
	direct := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		resp, err := direct.Get(ctx, metastore.DefaultPrefix+"/brokers/ids/"+metastore.BrokerEntity(1))
		if err != nil {
			t.Fatalf("waiting for the lease to expire: %v", err)
		}
		if len(resp.Kvs) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantFenced(t, f, "lease expired, etcd not yet heard", true)
	bridge.Resume()
	select {
	case <-reg.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the expired registration was not given up once etcd answered")
	}
	f.lost(reg)
	wantFenced(t, f, "registration lost", false)
	again := register(t, s)
	f.registered(again, func() {})
	wantFenced(t, f, "registered again, old leadership not yet re-confirmed", false)
	f.confirm(reg.Epoch()) // a late LeaderAndIsr of the old incarnation
	wantFenced(t, f, "old epoch confirmed", false)
	f.confirm(again.Epoch())
	if err := f.Check().Err; err != nil {
		t.Fatalf("after the full LeaderAndIsr of the new epoch: %v", err)
	}

	// A broker that leads nothing needs no confirmation.
	led = 0
	f.lost(again)
	_ = again.Close(context.Background())
	third := register(t, s)
	f.registered(third, func() {})
	if err := f.Check().Err; err != nil {
		t.Fatalf("registered with no leaderships: %v", err)
	}
}

// A new incarnation registered while it still held old leaderships waits
// for the controller to tell it its roles; if those leaderships go (the
// partitions were moved off it while it was out, and the full
// UpdateMetadata deleted them as strays), nothing is left to be told and no
// LeaderAndIsr may ever come: it confirms itself.
func TestLeaseFenceConfirmsOnceItLeadsNothing(t *testing.T) {
	srv := etcdtest.Start(t)
	s, err := metastore.New(srv.Client(t), metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	led := 1
	f := newLeaseFence(logging.Discard(), nil, func() int { return led })
	reg := register(t, s)
	f.registered(reg, func() {})
	f.confirmIfLeadingNothing()
	wantFenced(t, f, "registered while leading partitions of no confirmed epoch", false)
	led = 0
	f.confirmIfLeadingNothing()
	if err := f.Check().Err; err != nil {
		t.Fatalf("leading nothing any more: %v", err)
	}
}

package metastore

import (
	"context"
	"testing"
	"time"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/kerr"
)

func TestBrokerEpochIsCreateRevisionAndGrowsAcrossIncarnations(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	bridge := srv.NewBridge(t)
	first := newStore(t, bridge.Client(t))
	other := newStore(t, srv.Client(t))

	reg, err := first.RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "127.0.0.1:9101", Rack: "a"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := srv.Client(t).Get(ctx, other.k.broker(1))
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("registration key: %v %v", kv, err)
	}
	if reg.Epoch() != kv.Kvs[0].CreateRevision {
		t.Fatalf("broker epoch %d, key CreateRevision %d", reg.Epoch(), kv.Kvs[0].CreateRevision)
	}

	// While the first incarnation lives, a second registration is refused.
	_, err = other.RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "127.0.0.1:9999"}, shortTTL)
	wantCode(t, err, kerr.DuplicateBrokerRegistration)

	// The first incarnation stalls; its lease expires; re-registering (a
	// fast bounce, waiting out the old lease) gets a larger epoch.
	bridge.Pause()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	again, err := other.RegisterBroker(wctx, BrokerInfo{ID: 1, Address: "127.0.0.1:9101"}, shortTTL, WaitForExpiry())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("re-registration waited %s for the old lease", time.Since(start))
	if again.Epoch() <= reg.Epoch() {
		t.Fatalf("re-registered epoch %d, not above %d", again.Epoch(), reg.Epoch())
	}
	// The stalled incarnation learns it when etcd answers it again.
	bridge.Resume()
	waitClosed(t, reg.Done(), 10*time.Second, "stalled registration's Done")

	brokers, _, err := other.Brokers(ctx)
	if err != nil || len(brokers) != 1 || brokers[0].Epoch != again.Epoch() || brokers[0].Address != "127.0.0.1:9101" {
		t.Fatalf("brokers = %+v, %v", brokers, err)
	}
	if err := again.Close(ctx); err != nil {
		t.Fatal(err)
	}
	brokers, _, _ = other.Brokers(ctx)
	if len(brokers) != 0 {
		t.Fatalf("brokers after Close = %+v", brokers)
	}
}

func TestRevokeBrokerRemovesItAtOnceAndWatchReportsIt(t *testing.T) {
	srv, ctrl := startStore(t)
	ctx := testCtx(t)
	brokerSide := newStore(t, srv.Client(t))
	sess := elect(t, ctx, ctrl, 1, longTTL)

	_, rev, err := ctrl.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch := ctrl.WatchBrokers(ctx, rev+1)
	reg, err := brokerSide.RegisterBroker(ctx, BrokerInfo{ID: 2, Address: "127.0.0.1:9102"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())

	wantCode(t, sess.RevokeBroker(ctx, 2, reg.Epoch()-1), kerr.StaleBrokerEpoch)
	wantCode(t, sess.RevokeBroker(ctx, 3, 0), kerr.BrokerIDNotRegistered)

	revoked := time.Now()
	if err := sess.RevokeBroker(ctx, 2, reg.Epoch()); err != nil {
		t.Fatal(err)
	}
	brokers, _, err := ctrl.Brokers(ctx)
	if err != nil || len(brokers) != 0 {
		t.Fatalf("brokers right after revoke = %+v, %v", brokers, err)
	}
	waitClosed(t, reg.Done(), 500*time.Millisecond, "revoked registration's Done")
	t.Logf("revoke to broker noticing: %s", time.Since(revoked))

	var events []Event
	for len(events) < 2 {
		select {
		case wr := <-watch:
			if wr.Err != nil {
				t.Fatal(wr.Err)
			}
			events = append(events, wr.Events...)
		case <-time.After(2 * time.Second):
			t.Fatalf("membership events = %+v", events)
		}
	}
	join, leave := events[0], events[1]
	if join.Type != EventPut || join.Broker == nil || join.Broker.Epoch != reg.Epoch() {
		t.Fatalf("join event = %+v", join)
	}
	if leave.Type != EventDelete || leave.BrokerID != 2 || leave.Broker == nil ||
		leave.Broker.Epoch != reg.Epoch() || leave.Revision <= join.Revision {
		t.Fatalf("leave event = %+v", leave)
	}
}

// A broker registration whose key was deleted stops renewing its lease, so
// registering again leaves no lease behind renewed for nothing.
func TestLostBrokerRegistrationStopsRenewingItsLease(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	direct := srv.Client(t)
	first, err := s.RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "127.0.0.1:9101"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(context.Background())
	if _, err := direct.Delete(ctx, s.k.broker(1)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, first.Done(), 3*time.Second, "registration noticing its key was deleted")
	again, err := s.RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "127.0.0.1:9101"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	waitLeaseGone(t, direct, first.Lease(), shortTTL+5*time.Second)
}

// A registration carries the controller epoch etcd held when it was made,
// read in its own transaction: 0 before the first election, then the
// newest, whether or not its controller is still in office.
func TestRegistrationCarriesTheControllerEpochOfItsRevision(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	first, err := s.RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "127.0.0.1:9101"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	if e := first.ControllerEpoch(); e != 0 {
		t.Fatalf("registered before any election: controller epoch %d, want 0", e)
	}
	for id := int32(1); id <= 2; id++ { // two terms, both over
		if err := elect(t, ctx, s, id, shortTTL).Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	newest, err := s.ControllerEpoch(ctx)
	if err != nil || newest < 2 {
		t.Fatalf("controller epoch after two terms: %d, %v", newest, err)
	}
	second, err := s.RegisterBroker(ctx, BrokerInfo{ID: 2, Address: "127.0.0.1:9102"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	if e := second.ControllerEpoch(); e != newest {
		t.Fatalf("registered after two terms: controller epoch %d, want %d", e, newest)
	}
}

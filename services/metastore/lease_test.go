package metastore

import (
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
	waitClosed(t, reg.Done(), longTTL, "Done of the unrenewed registration")
	if reg.LostReason() == "" {
		t.Fatal("Done closed without a reason")
	}
	bridge.Resume()
}

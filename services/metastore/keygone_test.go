package metastore

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
)

const rereadLog = "reading the key again"

// waitLogged reports whether logs holds what within d.
func waitLogged(logs *logBuffer, what string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(logs.String(), what) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// failKeyWatches stalls the store's watch connection until its watches
// give it up, compacts the history past them meanwhile, and lets them
// back: their streams fail with ErrCompacted, and each watched key is read
// again (waited for, bounded; without the read again the test goes on and
// its outcome tells).
func failKeyWatches(t *testing.T, ctx context.Context, s *Store, br *etcdtest.Bridge, direct *clientv3.Client, logs *logBuffer) {
	t.Helper()
	br.Pause()
	var last int64
	for range 5 {
		last = putRev(t, ctx, direct, "/tidemark/unrelated", "x")
	}
	if _, err := direct.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	if !waitLogged(logs, cutOffLog, 3*s.watchTimeout()) {
		t.Fatalf("the stalled watch was not given up:\n%s", logs)
	}
	br.Resume()
	if !waitLogged(logs, rereadLog, 10*time.Second) {
		t.Logf("no key read again after the compacted watch:\n%s", logs)
	}
}

// TestRegistrationNoticesKeyDeletedAfterItsWatchFailed: a registration's
// watch on its own key that comes back to a compacted history fails.
// Before, the registration then relied on its lease alone, and a key
// deleted while the lease lived on (an operator's delete, a revoke of the
// lease that failed after the key was deleted) went unnoticed for good:
// the broker renewed a lease that held nothing, counted as departed by the
// controller, and never registered again. The key is read again and
// watched from there.
func TestRegistrationNoticesKeyDeletedAfterItsWatchFailed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, _, logs := bridgedWatchStore(t, srv, br, time.Second)
	direct := srv.Client(t)

	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 4, Address: "127.0.0.1:1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	failKeyWatches(t, ctx, s, br, direct, logs)
	select {
	case <-reg.Done():
		t.Fatalf("the registration was lost (%s) with its key in place", reg.LostReason())
	default:
	}

	if _, err := direct.Delete(ctx, "/tidemark/brokers/ids/4"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, reg.Done(), 3*longTTL+s.watchTimeout(), "Done after the registration key was deleted")
}

// TestControllerSessionEndsWhenItsKeyIsDeletedAfterItsWatchFailed: the
// same for the controller's term: its key deleted after its watch failed
// ends the session, and a standby can take office.
func TestControllerSessionEndsWhenItsKeyIsDeletedAfterItsWatchFailed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, _, logs := bridgedWatchStore(t, srv, br, time.Second)
	direct := srv.Client(t)

	sess := elect(t, ctx, s, 1, longTTL)
	failKeyWatches(t, ctx, s, br, direct, logs)
	select {
	case <-sess.Done():
		t.Fatal("the session ended with its key in place")
	default:
	}

	if _, err := direct.Delete(ctx, "/tidemark/controller"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sess.Done(), 3*longTTL+s.watchTimeout(), "Done after the controller key was deleted")
}

// TestControllerNodeRegistrationEndsWhenItsKeyIsDeletedAfterItsWatchFailed:
// the same for a controller process's presence key.
func TestControllerNodeRegistrationEndsWhenItsKeyIsDeletedAfterItsWatchFailed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, _, logs := bridgedWatchStore(t, srv, br, time.Second)
	direct := srv.Client(t)

	reg, err := s.RegisterController(ctx, ControllerNode{ID: 2, Address: "127.0.0.1:2"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	failKeyWatches(t, ctx, s, br, direct, logs)
	select {
	case <-reg.Done():
		t.Fatal("the registration ended with its key in place")
	default:
	}

	if _, err := direct.Delete(ctx, "/tidemark/controllers/2"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, reg.Done(), 3*longTTL+s.watchTimeout(), "Done after the controller node key was deleted")
}

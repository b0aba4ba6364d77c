package metastore

import (
	"errors"
	"testing"
	"time"

	"tidemark.io/services/internal/etcdtest"
)

// TestQuietWatchSurvivesCompactionAndReconnect: a watch that missed nothing
// (its prefix was quiet) must not fail with ErrCompacted because etcd
// compacted other keys' history and then the client reconnected. The
// controller steps down on any watch error, so without fresh progress
// every etcd restart or link blip after an auto-compaction (1 h in the
// compose stack) ends a quiet cluster's controller term.
func TestQuietWatchSurvivesCompactionAndReconnect(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t, etcdtest.WithProgressNotify(100*time.Millisecond))
	br := srv.NewBridge(t)
	watcher := newStore(t, br.Client(t))
	direct := srv.Client(t)
	writer := newStore(t, direct)

	cl, err := watcher.LoadCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := watcher.WatchBrokers(ctx, cl.Revision+1)

	// Unrelated writes move the revision on; nothing under brokers/ids.
	var last int64
	for range 5 {
		resp, err := direct.Put(ctx, "/tidemark/producer_id_block", `{"next":1}`)
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	// The quiet watch lives on for a while (in production: an hour) ...
	time.Sleep(time.Second)
	// ... then the periodic compactor runs and the link blips.
	if _, err := direct.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	br.DropConnections()

	reg, err := writer.RegisterBroker(ctx, BrokerInfo{ID: 7, Address: "127.0.0.1:1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)

	select {
	case wr, ok := <-ch:
		if !ok {
			t.Fatal("watch closed without an error or the registration")
		}
		if wr.Err != nil {
			t.Fatalf("quiet watch failed after compaction+reconnect although it missed nothing: %v (compacted: %v)",
				wr.Err, errors.Is(wr.Err, ErrCompacted))
		}
		if len(wr.Events) == 0 || wr.Events[0].BrokerID != 7 {
			t.Fatalf("got %+v, want broker 7's registration", wr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
}

// TestRegistrationNoticesKeyDeletedAfterCompactionAndReconnect: Done is
// documented to close when the registration key is deleted. The key watch
// starts at the registration's creation revision; after a compaction and a
// reconnect it fails with ErrCompacted and hold drops it silently, so a
// deleted key (lease still alive and renewed) is never noticed.
func TestRegistrationNoticesKeyDeletedAfterCompactionAndReconnect(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t, etcdtest.WithProgressNotify(100*time.Millisecond))
	br := srv.NewBridge(t)
	s := newStore(t, br.Client(t))
	direct := srv.Client(t)

	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 3, Address: "127.0.0.1:1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	var last int64
	for range 5 {
		resp, err := direct.Put(ctx, "/tidemark/unrelated", "x")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	time.Sleep(time.Second)
	if _, err := direct.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	br.DropConnections()
	time.Sleep(500 * time.Millisecond) // the client is back

	if _, err := direct.Delete(ctx, "/tidemark/brokers/ids/3"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, reg.Done(), 3*longTTL, "Done after the registration key was deleted")
}

package metastore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// etcd restored from an older snapshot starts again at an older revision.
// A watch that had seen later revisions resumed from the next of those and
// waited, in silence, for etcd's revision to climb back there: every change
// made meanwhile was missed (an ACL binding, the controller key a standby
// waits to see deleted), and the watch timeout only opened the same watch
// again. The watch must fail instead, so its caller reads etcd again.
func TestWatchFailsWhenEtcdGoesBackToAnOlderRevision(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	cli := srv.Client(t)
	prefix := s.k.p + "/acls/"
	if _, err := cli.Put(ctx, prefix+"before", "1"); err != nil {
		t.Fatal(err)
	}
	backup := srv.Backup(t)
	var rev int64
	for i := range 20 { // history the backup has not seen
		resp, err := cli.Put(ctx, fmt.Sprintf("%safter-%d", prefix, i), "1")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	wch := s.WatchPrefix(ctx, prefix, rev+1)
	srv.RestoreBackup(t, backup, 0)

	// A change after the restore, at a revision below the watch's.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		resp, err := cli.Put(wctx, prefix+"restored", "1")
		if err == nil {
			if resp.Header.Revision > rev {
				t.Fatalf("etcd at revision %d after the restore, want below %d", resp.Header.Revision, rev)
			}
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("put after the restore: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case r, ok := <-wch:
		switch {
		case !ok:
			t.Fatal("the watch closed without an error")
		case r.Err == nil:
			t.Fatalf("the watch from revision %d handed on %v after etcd went back", rev+1, r.Events)
		case !errors.Is(r.Err, ErrRevisionWentBack):
			t.Fatalf("the watch failed with %v, want ErrRevisionWentBack", r.Err)
		}
	case <-wctx.Done():
		t.Fatalf("the watch from revision %d still waits, in silence, for a revision etcd went back from", rev+1)
	}
}

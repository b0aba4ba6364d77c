package logstore

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// Retention renames the segments it deletes out of the log under the
// partition's locks and unlinks them in the background: the deletion
// returns, and appends and reads go on, while freeing the files' blocks
// waits for the device. A crash before the unlink leaves .deleted files,
// which loading deletes.
func TestRetentionDoesNotWaitToFreeDeletedSegments(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetentionBytes = 128 << 10
	l, fsys := openSlowFreeLog(t, cfg, 6)
	mem := fsys.FS
	cfg = l.Config()
	leo := l.LogEndOffset()
	fsys.removes.Store(true)
	var deleted int
	fsys.returns(t, "retention waited for a deleted segment's files to be unlinked", func() error {
		var err error
		deleted, err = l.DeleteOldSegments(leo)
		return err
	})
	if deleted == 0 {
		t.Fatal("retention deleted nothing")
	}
	start := l.LogStartOffset()
	for n := len(l.segments()); len(l.segments()) < n+2; { // rolls, pruning snapshots
		appendLeader(t, l, plain(4, 4000, 1000), 0)
	}
	if got := readAll(t, l, start, l.LogEndOffset(), 1<<20); got[0].BaseOffset() != start || got[len(got)-1].NextOffset() != l.LogEndOffset() {
		t.Fatalf("read %d..%d after retention; want %d..%d", got[0].BaseOffset(), got[len(got)-1].NextOffset(), start, l.LogEndOffset())
	}
	retired := retiredFiles(t, mem)
	if len(retired) == 0 {
		t.Fatal("no .deleted files while their unlink is stalled")
	}

	// A crash now (which waits for fileMu): loading deletes the retired
	// files and keeps the log.
	fsys.returns(t, "a crash waited for a stalled unlink", func() error { l.Abandon(); return nil })
	fsys.removes.Store(false) // the stalled unlink stays stalled; loading's own go through
	l2 := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg})
	l2.bg.Wait()
	if got := retiredFiles(t, mem); len(got) != 0 {
		t.Fatalf("loading left %v", got)
	}
	if l2.LogStartOffset() != start || l2.LogEndOffset() < leo {
		t.Fatalf("after the crash the log spans %d..%d; want from %d to at least %d", l2.LogStartOffset(), l2.LogEndOffset(), start, leo)
	}
	fsys.release()
	l.bg.Wait()
}

// Loading a log clears what a crash left, retired segment files and a
// spare segment's temp file, without waiting for their blocks to be freed:
// the log opens while those unlinks wait for the device, the temp file's
// name is free at once, and Close waits for the unlinks.
func TestLoadingDoesNotWaitToFreeLeftovers(t *testing.T) {
	l, fsys := openSlowFreeLog(t, DefaultConfig(), 3)
	mem := fsys.FS
	cfg, start, leo := l.Config(), l.LogStartOffset(), l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	leftovers := []string{offsetName(leo+1000, logSuffix+deletedSuffix), offsetName(leo+1000, indexSuffix+deletedSuffix), spareName}
	for _, name := range leftovers {
		f, err := mem.Create(testDir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("left by a crash"), 0); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			t.Fatal(err)
		}
	}

	fsys.removes.Store(true)
	var l2 *Log
	fsys.returns(t, "loading waited for a leftover file to be unlinked", func() error {
		var err error
		l2, err = Open(Options{FS: fsys, Dir: testDir, Config: cfg})
		return err
	})
	fsys.waitStalled(t, "loading never unlinked its leftovers")
	if l2.LogStartOffset() != start || l2.LogEndOffset() != leo {
		t.Fatalf("reopened log spans %d..%d; want %d..%d", l2.LogStartOffset(), l2.LogEndOffset(), start, leo)
	}
	if _, err := mem.Stat(testDir + "/" + spareName); !vfs.IsNotExist(err) {
		t.Fatalf("the spare segment's temp file still has its name while its unlink waits: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- l2.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a leftover's unlink was stalled", err)
	case <-time.After(50 * time.Millisecond):
	}
	fsys.release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := retiredFiles(t, mem); len(got) != 0 {
		t.Fatalf("left after Close: %v", got)
	}
	if got := namesEnding(t, mem, testDir, tmpSuffix); len(got) != 0 {
		t.Fatalf("left after Close: %v", got)
	}
}

// A power loss while retention retires several segments leaves the log
// whole from some segment on: each segment's renames are durable before
// the next one's, so no crash keeps a later segment's retirement and loses
// an earlier one's (which left a gap that loading cut the log at, losing
// every flushed record above it: 12 of 16 crashes did, syncing once after
// all the renames).
func TestCrashDuringRetentionKeepsTheLogWhole(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetentionBytes = 128 << 10
	l, fsys := openSlowFreeLog(t, cfg, 6)
	mem := fsys.FS.(*vfs.MemFS)
	cfg = l.Config()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	segs := l.segments()
	active := segs[len(segs)-1].base // the HW passed: the active segment stays (no roll)
	fsys.syncs.Store(true)
	deleted := make(chan error, 1)
	go func() { _, err := l.DeleteOldSegments(active); deleted <- err }()
	fsys.waitStalled(t, "retention never synced its directory")
	for seed := range uint64(32) { // the power fails now, a sync not yet done
		r, err := Open(Options{FS: mem.CrashClone(seed), Dir: testDir, Config: cfg, RecoveryPoint: leo})
		if err != nil {
			t.Fatalf("seed %d: reopening after the crash: %v", seed, err)
		}
		if r.LogEndOffset() != leo {
			t.Fatalf("seed %d: the log spans %d..%d after the crash; %d was flushed", seed, r.LogStartOffset(), r.LogEndOffset(), leo)
		}
		readAll(t, r, r.LogStartOffset(), leo, 1<<20)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fsys.syncs.Store(false)
	fsys.release()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatalf("retention deleted nothing (log start %d)", l.LogStartOffset())
	}
}

// A power loss while a truncation retires the segments above its cut, its
// renames not yet durable, loses nothing below the cut: the reopened log
// ends at the cut or above (segments above it may come back, as in Kafka:
// the follower truncates again when it restarts), every batch in it the
// one written there.
func TestCrashDuringTruncationLosesNothingBelowTheCut(t *testing.T) {
	l, fsys := openSlowFreeLog(t, DefaultConfig(), 6)
	mem := fsys.FS.(*vfs.MemFS)
	cfg := l.Config()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	before := readAll(t, l, 0, leo, 1<<20)
	segs := l.segments()
	cut := segs[2].base + 1 // inside the third segment's first batch: the new LEO is its base
	fsys.syncs.Store(true)
	truncated := make(chan error, 1)
	go func() { _, err := l.TruncateTo(cut); truncated <- err }()
	fsys.waitStalled(t, "the truncation never synced its directory")
	for seed := range uint64(32) { // the power fails now
		r, err := Open(Options{FS: mem.CrashClone(seed), Dir: testDir, Config: cfg, RecoveryPoint: leo})
		if err != nil {
			t.Fatalf("seed %d: reopening after the crash: %v", seed, err)
		}
		if r.LogEndOffset() < segs[2].base {
			t.Fatalf("seed %d: the log ends at %d after the crash, below the truncation's %d", seed, r.LogEndOffset(), segs[2].base)
		}
		for i, b := range readAll(t, r, 0, r.LogEndOffset(), 1<<20) {
			if !bytes.Equal(b, before[i]) {
				t.Fatalf("seed %d: batch at %d is not the one written there", seed, b.BaseOffset())
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fsys.syncs.Store(false)
	fsys.release()
	if err := <-truncated; err != nil {
		t.Fatal(err)
	}
}

// Retention rewrites the leader-epoch checkpoint in the background, as
// Kafka flushes it asynchronously after a log-start move since 3.8: the
// pass returns, and appends go on, while the checkpoint's fsync waits for
// the device. The cache holds the trimmed entries at once; Close waits for
// the file, which then holds them too.
func TestRetentionRewritesTheEpochCheckpointInTheBackground(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetentionBytes = 128 << 10
	l, fsys := openSlowFreeLog(t, cfg, 6)
	segs := l.segments()
	active := segs[len(segs)-1].base // the HW passed: the active segment stays (no roll)
	fsys.epochs.Store(true)
	fsys.returns(t, "retention waited for the leader epoch checkpoint's fsync", func() error {
		_, err := l.DeleteOldSegments(active)
		return err
	})
	fsys.waitStalled(t, "retention never rewrote the leader epoch checkpoint")
	start := l.LogStartOffset()
	if e := l.EpochEntries(); start == 0 || len(e) != 1 || e[0].StartOffset != start {
		t.Fatalf("after retention to %d the epoch cache holds %v", start, e)
	}
	fsys.returns(t, "an append waited for the leader epoch checkpoint's fsync", func() error {
		_, err := l.AppendAsLeader(plain(1, 10, 1000).build(), 0)
		return err
	})
	fsys.release()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _, err := readEpochCheckpoint(fsys.FS, testDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].StartOffset != start {
		t.Fatalf("the checkpoint holds %v after Close; want one entry from %d", entries, start)
	}
}

// retiredFiles lists the .deleted files of the test log's directory.
func retiredFiles(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	return namesEnding(t, fsys, testDir, deletedSuffix)
}

// namesEnding lists the names in dir that end with suffix.
func namesEnding(t *testing.T, fsys vfs.FS, dir, suffix string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// A follower's truncation retires the segments and producer snapshots above
// the cut, and a truncation to a start past the log all of them, the same
// way: the fetcher's truncation returns while their unlink is stalled.
func TestTruncationDoesNotWaitToFreeDeletedSegments(t *testing.T) {
	l, fsys := openSlowFreeLog(t, DefaultConfig(), 6)
	mem := fsys.FS
	cut := l.segments()[2].base + 1
	fsys.removes.Store(true)
	fsys.returns(t, "truncation waited for the files above the cut to be unlinked", func() error {
		leo, err := l.TruncateTo(cut)
		if err == nil && (leo > cut || len(l.segments()) != 3) {
			t.Errorf("truncated to %d with %d segments; want at most %d with 3", leo, len(l.segments()), cut)
		}
		return err
	})
	if len(retiredFiles(t, mem)) == 0 {
		t.Fatal("no .deleted files while their unlink is stalled")
	}
	next := l.LogEndOffset() + 1000
	fsys.returns(t, "a full truncation waited for the log's files to be unlinked", func() error {
		return l.TruncateFullyAndStartAt(next)
	})
	appendLeader(t, l, plain(4, 4000, 1000), 0)
	if got := readAll(t, l, next, l.LogEndOffset(), 1<<20); len(got) != 1 || got[0].BaseOffset() != next {
		t.Fatalf("after the full truncation the log reads %d batches; want one at %d", len(got), next)
	}
	fsys.stalls(t, "no unlink was stalled")
	l.bg.Wait()
	if got := retiredFiles(t, mem); len(got) != 0 {
		t.Fatalf("left after the background unlinks: %v", got)
	}
}

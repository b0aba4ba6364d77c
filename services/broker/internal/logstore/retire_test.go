package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

// Retention takes the segments it deletes out of the log under the
// partition's locks and renames and unlinks their files in the background:
// the deletion returns, and appends and reads go on, while freeing the
// files' blocks waits for the device. A crash before the unlink leaves
// .deleted files, which loading deletes.
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
	waitRenamed(l)
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

// waitRenamed waits until the segments retention took out of l have had
// their files renamed to .deleted.
func waitRenamed(l *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitRetirementsLocked()
}

// Retention does not wait for the directory syncs that order its renames
// (one per segment deleted, each behind whatever the device is doing), nor
// for a flush in flight: it returns while they are stalled, appends (rolls,
// whose flushes stall too) and reads go on, the segments are out of reach
// at once, and their files go once the syncs do. A second pass meanwhile
// (while the first's epoch checkpoint and the rolls' flushes wait) retires
// its segments after the first's. A truncation that empties the log and
// restarts it at a retiring segment's base waits for that segment's files
// to be renamed, and the new segment keeps its files.
func TestRetentionDoesNotWaitForItsDirectorySyncs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetentionBytes = 128 << 10
	l, fsys := openSlowFreeLog(t, cfg, 6)
	mem := fsys.FS
	segs := l.segments()
	fsys.syncs.Store(true)
	var deleted int
	fsys.returns(t, "retention waited for its directory sync", func() error {
		var err error
		deleted, err = l.DeleteOldSegments(segs[2].base) // the high watermark: two segments below it
		return err
	})
	if deleted != 2 {
		t.Fatalf("retention deleted %d segments; want 2", deleted)
	}
	fsys.waitStalled(t, "retention never synced its directory")
	start := l.LogStartOffset()
	if start != segs[2].base {
		t.Fatalf("log start %d after retention; want %d", start, segs[2].base)
	}
	_, err := l.Read(segs[0].base, 1<<20, l.LogEndOffset())
	wantCode(t, err, kerr.OffsetOutOfRange)
	fsys.returns(t, "an append or read waited for retention's directory sync", func() error {
		for n := len(l.segments()); len(l.segments()) < n+2; { // each roll's flush stalls in its directory sync
			appendLeader(t, l, plain(4, 4000, 1000), 0)
		}
		got := readAll(t, l, start, l.LogEndOffset(), 1<<20)
		if got[0].BaseOffset() != start || got[len(got)-1].NextOffset() != l.LogEndOffset() {
			return fmt.Errorf("read %d..%d; want %d..%d", got[0].BaseOffset(), got[len(got)-1].NextOffset(), start, l.LogEndOffset())
		}
		return nil
	})
	// A second pass while the first waits: its segments' files are renamed
	// only after the first pass's.
	var again int
	fsys.returns(t, "a second retention pass waited for the first", func() error {
		var err error
		again, err = l.DeleteOldSegments(segs[len(segs)-1].base) // flushed before the stall
		return err
	})
	if again == 0 {
		t.Fatal("the second pass deleted nothing")
	}
	if got := namesEnding(t, mem, testDir, logSuffix); !slices.Contains(got, offsetName(segs[1].base, logSuffix)) ||
		!slices.Contains(got, offsetName(segs[2].base, logSuffix)) {
		t.Fatalf("log files %v while the first segment's rename waits for its sync: a later segment's was renamed", got)
	}

	// Restarting the log at the second segment's base, whose files are
	// still to be renamed, waits for them.
	restarted := make(chan error, 1)
	go func() { restarted <- l.TruncateFullyAndStartAt(segs[1].base) }()
	select {
	case err := <-restarted:
		t.Fatalf("restarting the log at %d returned (%v) before that retired segment's files were renamed", segs[1].base, err)
	case <-time.After(50 * time.Millisecond):
	}
	fsys.syncs.Store(false)
	fsys.release()
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	appendLeader(t, l, plain(4, 4000, 1000), 0)
	leo := l.LogEndOffset()
	l.bg.Wait()
	if got := retiredFiles(t, mem); len(got) != 0 {
		t.Fatalf("left after retention: %v", got)
	}
	if got := namesEnding(t, mem, testDir, logSuffix); !slices.Equal(got, []string{offsetName(segs[1].base, logSuffix)}) {
		t.Fatalf("log files %v; want only the restarted segment's", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: l.Config()})
	if r.LogStartOffset() != segs[1].base || r.LogEndOffset() != leo {
		t.Fatalf("reopened log spans %d..%d; want %d..%d", r.LogStartOffset(), r.LogEndOffset(), segs[1].base, leo)
	}
}

// Deleting segments a flush may still be syncing (above the recovery point:
// DeleteRecords right after a roll) waits for the flush, and the log stays
// whole: retention's fast path is only for segments no flush touches.
func TestDeletingUnflushedSegmentsWaitsForTheFlush(t *testing.T) {
	l, fsys := openSlowFreeLog(t, DefaultConfig(), 3)
	fsys.syncs.Store(true)
	for n := len(l.segments()); len(l.segments()) < n+1; { // the roll's flush stalls after syncing the data
		appendLeader(t, l, plain(4, 4000, 1000), 0)
	}
	fsys.waitStalled(t, "the roll's flush never synced its directory")
	segs := l.segments()
	target := segs[len(segs)-1].base // wholly deletes the segment just sealed
	if rp := l.RecoveryPoint(); rp >= target {
		t.Fatalf("recovery point %d while the roll's flush waits; want below %d", rp, target)
	}
	advanced := make(chan error, 1)
	go func() { advanced <- l.AdvanceLogStartOffset(target, l.LogEndOffset()) }()
	select {
	case err := <-advanced:
		t.Fatalf("deleting a segment the flush in flight covers returned (%v) before the flush", err)
	case <-time.After(50 * time.Millisecond):
	}
	fsys.syncs.Store(false)
	fsys.release()
	if err := <-advanced; err != nil {
		t.Fatal(err)
	}
	l.bg.Wait()
	if l.LogStartOffset() != target || len(l.segments()) != 1 {
		t.Fatalf("log start %d with %d segments; want %d with 1", l.LogStartOffset(), len(l.segments()), target)
	}
	appendLeader(t, l, plain(1, 100, 1000), 0)
	if err := l.Flush(); err != nil {
		t.Fatalf("the log failed: %v", err)
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

// Retention that empties a log whose newest records are not flushed yet
// (an idle log's active segment is flushed by no roll) rolls a new, empty
// segment at the log end and retires the old ones in the background. A
// power loss before their renames are durable brings the old segments
// back: their tail must be whole, or the gap below the new segment made
// loading cut the log there, its next offset back below offsets already
// handed out (and reused for new records).
func TestRetentionEmptyingALogKeepsItsNextOffsetThroughAPowerLoss(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	mem := newMem(t)
	ffs := vfs.NewFaultFS(mem)
	l := openLogOpts(t, Options{FS: ffs, Dir: testDir, Config: cfg, Now: clk.Now})
	for i := range 30 {
		appendLeader(t, l, plain(3, 40, 2000+int64(i)), 0) // 1970: past retention
	}
	l.bg.Wait() // the rolls' flushes
	for i := range 3 {
		appendLeader(t, l, plain(3, 40, 3000+int64(i)), 0)
	}
	rp, leo := l.RecoveryPoint(), l.LogEndOffset()
	if len(l.segments()) < 2 || rp >= leo || l.active().base > rp {
		t.Fatalf("setup: %d segments, recovery point %d, active base %d, LEO %d", len(l.segments()), rp, l.active().base, leo)
	}
	// The retired segments' renames wait: the power fails before any.
	stall := make(chan struct{})
	defer ffs.Inject(vfs.Fault{Ops: vfs.OpRename, Path: logSuffix + deletedSuffix, Stall: stall})()
	defer close(stall)
	if n, err := l.DeleteOldSegments(leo); err != nil || l.LogStartOffset() != leo {
		t.Fatalf("retention: %d segments, %v; log start %d, LEO %d", n, err, l.LogStartOffset(), leo)
	}
	for seed := range uint64(64) {
		r, err := Open(Options{FS: mem.CrashClone(seed), Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: rp})
		if err != nil {
			t.Fatalf("seed %d: reopening after the crash: %v", seed, err)
		}
		if r.LogEndOffset() != leo {
			t.Fatalf("seed %d: the log ends at %d after the crash (log start %d); it ended at %d", seed, r.LogEndOffset(), r.LogStartOffset(), leo)
		}
		readAll(t, r, r.LogStartOffset(), leo, 1<<20)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

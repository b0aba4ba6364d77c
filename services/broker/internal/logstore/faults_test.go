package logstore

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

func faulty(t *testing.T) (*vfs.MemFS, *vfs.FaultFS, *Log) {
	t.Helper()
	mem := newMem(t)
	ffs := vfs.NewFaultFS(mem)
	l := openLogOpts(t, Options{FS: ffs, Dir: testDir, Config: smallConfig()})
	return mem, ffs, l
}

func TestENOSPCMidAppendLeavesLogConsistent(t *testing.T) {
	_, ffs, l := faulty(t)
	fill(t, l, 5, 3, 40)
	leo := l.LogEndOffset()
	act := l.active()
	remove := ffs.Inject(vfs.Fault{Ops: vfs.OpWrite, Path: logSuffix, Err: syscall.ENOSPC, Partial: true})
	for range 3 {
		_, err := l.AppendAsLeader(plain(3, 40, 1).build(), 0)
		if kerr.CodeOf(err) != kerr.KafkaStorageError || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), act.logPath) {
			t.Fatalf("append on a full disk: %v", err)
		}
		if l.LogEndOffset() != leo {
			t.Fatalf("LEO moved to %d", l.LogEndOffset())
		}
		if size, _ := act.log.Size(); size != act.size.Load() {
			t.Fatalf("partial write left: file %d bytes, committed %d", size, act.size.Load())
		}
		readAll(t, l, 0, leo, 1<<20)
	}
	remove()
	info := appendLeader(t, l, plain(3, 40, 1), 0)
	if info.FirstOffset != leo {
		t.Fatalf("append after the disk freed up went to %d", info.FirstOffset)
	}
	readAll(t, l, 0, l.LogEndOffset(), 1<<20)
}

func TestFailedWriteWhoseCleanupFailsIsOverwritten(t *testing.T) {
	mem, ffs, l := faulty(t)
	fill(t, l, 3, 3, 40)
	leo := l.LogEndOffset()
	rmW := ffs.Inject(vfs.Fault{Ops: vfs.OpWrite, Path: logSuffix, Count: 1, Err: syscall.EIO, Partial: true})
	rmT := ffs.Inject(vfs.Fault{Ops: vfs.OpTruncate, Path: logSuffix, Count: 1, Err: syscall.EIO})
	if _, err := l.AppendAsLeader(plain(3, 40, 1).build(), 0); err == nil {
		t.Fatal("append succeeded")
	}
	rmW()
	rmT()
	// Garbage sits past the committed size; readers never look there and the
	// next append overwrites it.
	readAll(t, l, 0, leo, 1<<20)
	appendLeader(t, l, plain(3, 40, 2), 0)
	readAll(t, l, 0, l.LogEndOffset(), 1<<20)
	final := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	if r.LogEndOffset() != final || r.Stats().RecoveredTruncations != 0 {
		t.Fatalf("reopen: %+v", r.Stats())
	}
}

func TestFailedRollLeavesNothingBehind(t *testing.T) {
	mem, ffs, l := faulty(t)
	fill(t, l, 9, 3, 40) // just under one segment
	leo := l.LogEndOffset()
	remove := ffs.Inject(vfs.Fault{Ops: vfs.OpCreate, Path: timeIndexSuffix, Err: syscall.ENOSPC})
	var err error
	for range 5 {
		if _, err = l.AppendAsLeader(plain(3, 40, 1).build(), 0); err != nil {
			break
		}
	}
	if kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("append needing a roll: %v", err)
	}
	if got := len(segmentFiles(t, mem)); got != len(l.segments()) {
		t.Fatalf("%d segment files, %d segments", got, len(l.segments()))
	}
	ents, _ := mem.ReadDir(testDir)
	for _, e := range ents {
		if e.Name() > offsetName(l.active().base, "~") && !strings.HasPrefix(e.Name(), "leader") {
			t.Fatalf("leftover %s after a failed roll", e.Name())
		}
	}
	remove()
	readAll(t, l, 0, l.LogEndOffset(), 1<<20)
	appendLeader(t, l, plain(3, 40, 1), 0)
	if l.LogEndOffset() <= leo {
		t.Fatal("no progress after the fault cleared")
	}
	readAll(t, l, 0, l.LogEndOffset(), 1<<20)
}

func TestEpochCheckpointFailureFailsAppend(t *testing.T) {
	_, ffs, l := faulty(t)
	appendLeader(t, l, plain(2, 10, 1), 1)
	remove := ffs.Inject(vfs.Fault{Ops: vfs.OpRename, Path: epochCheckpointFile, Err: syscall.ENOSPC})
	_, err := l.AppendAsLeader(plain(2, 10, 1).build(), 2)
	if kerr.CodeOf(err) != kerr.KafkaStorageError || !strings.Contains(err.Error(), epochCheckpointFile) {
		t.Fatalf("append in a new epoch: %v", err)
	}
	if l.LogEndOffset() != 2 || l.LatestEpoch() != 1 {
		t.Fatalf("LEO %d latest epoch %d", l.LogEndOffset(), l.LatestEpoch())
	}
	remove()
	appendLeader(t, l, plain(2, 10, 1), 2)
	if l.LatestEpoch() != 2 {
		t.Fatal("epoch not recorded after recovery")
	}
}

func TestFsyncFailureFailsTheLog(t *testing.T) {
	_, ffs, l := faulty(t)
	fill(t, l, 5, 3, 40)
	leo := l.LogEndOffset()
	ffs.Inject(vfs.Fault{Ops: vfs.OpSync, Path: logSuffix, Err: syscall.EIO})
	err := l.Flush()
	if kerr.CodeOf(err) != kerr.KafkaStorageError || !errors.Is(err, syscall.EIO) {
		t.Fatalf("flush: %v", err)
	}
	if l.RecoveryPoint() != 0 {
		t.Fatalf("recovery point moved to %d after a failed fsync", l.RecoveryPoint())
	}
	ffs.Clear()
	// Durability is unknown after a failed fsync: writes keep failing.
	_, err = l.AppendAsLeader(plain(1, 1, 1).build(), 0)
	if kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("append after failed fsync: %v", err)
	}
	if _, err := l.TruncateTo(1); kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("truncate after failed fsync: %v", err)
	}
	readAll(t, l, 0, leo, 1<<20)
	if err := l.Close(); err == nil {
		t.Fatal("Close of a failed log reported success")
	}
}

func TestFsyncEveryAppend(t *testing.T) {
	mem := newMem(t)
	cfg := smallConfig()
	cfg.FsyncEveryAppend = true
	l := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: cfg})
	for i := range 25 {
		appendLeader(t, l, plain(3, 40, 1), 0)
		if l.RecoveryPoint() != l.LogEndOffset() {
			t.Fatalf("append %d: recovery point %d, LEO %d", i, l.RecoveryPoint(), l.LogEndOffset())
		}
		crashed := mem.CrashClone(uint64(i))
		r, err := Open(Options{FS: crashed, Dir: testDir, Config: cfg, RecoveryPoint: 0})
		if err != nil {
			t.Fatal(err)
		}
		if r.LogEndOffset() != l.LogEndOffset() {
			t.Fatalf("append %d: after a crash LEO %d, want %d", i, r.LogEndOffset(), l.LogEndOffset())
		}
		r.Close()
	}
}

func TestFlushMessagesAndInterval(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.FlushMessages = 10
	l := openLog(t, newMem(t), cfg, clk)
	appendLeader(t, l, plain(4, 1, 1), 0)
	appendLeader(t, l, plain(4, 1, 1), 0)
	if l.RecoveryPoint() != 0 {
		t.Fatalf("flushed after 8 records: %d", l.RecoveryPoint())
	}
	appendLeader(t, l, plain(4, 1, 1), 0)
	if l.RecoveryPoint() != 12 {
		t.Fatalf("recovery point %d after 12 records", l.RecoveryPoint())
	}
	cfg.FlushMessages = 0
	cfg.FlushInterval = time.Second
	l.SetConfig(cfg)
	appendLeader(t, l, plain(4, 1, 1), 0)
	l.FlushIfDue()
	if l.RecoveryPoint() != 12 {
		t.Fatal("flushed before flush.ms")
	}
	clk.Advance(2 * time.Second)
	l.FlushIfDue()
	if l.RecoveryPoint() != 16 {
		t.Fatalf("recovery point %d after flush.ms", l.RecoveryPoint())
	}
}

func TestRollFlushesTheSealedSegment(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	fill(t, l, 25, 3, 40)
	l.bg.Wait() // the flush after a roll runs in the background
	segs := l.segments()
	if len(segs) < 3 || l.RecoveryPoint() != segs[len(segs)-1].base {
		t.Fatalf("recovery point %d, active segment base %d", l.RecoveryPoint(), segs[len(segs)-1].base)
	}
}

// A roll on the append path fsyncs nothing: with every fsync stalled (a
// busy disk), the append that rolls still returns, and the rolls' files
// become durable with the next flush, before the recovery point moves.
func TestRollOnTheAppendPathWaitsForNoFsync(t *testing.T) {
	mem, ffs, l := faulty(t)
	// The first append of an epoch writes the epoch checkpoint, durably.
	appendLeader(t, l, plain(3, 40, 1), 0)
	stall := make(chan struct{})
	remove := ffs.Inject(vfs.Fault{Ops: vfs.OpSync | vfs.OpSyncDir, Stall: stall})
	released := false
	release := func() {
		if !released {
			released = true
			close(stall)
			remove()
		}
	}
	defer release()
	done := make(chan error, 1)
	go func() {
		var err error
		for range 25 { // several segments' worth (smallConfig)
			if _, err = l.AppendAsLeader(plain(3, 40, 1).build(), 0); err != nil {
				break
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("append: %v", err)
		}
	case <-time.After(10 * time.Second):
		release()
		<-done
		t.Fatal("an append that rolled waited for an fsync")
	}
	if n := len(l.segments()); n < 3 {
		t.Fatalf("%d segments: the appends did not roll", n)
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d moved while every fsync was stalled", rp)
	}
	if !l.dirSyncPending.Load() {
		t.Fatal("no directory sync pending after rolls that synced nothing")
	}
	release()
	l.bg.Wait()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	if rp := l.RecoveryPoint(); rp != leo {
		t.Fatalf("recovery point %d after a flush, LEO %d", rp, leo)
	}
	// A crash now loses nothing, whatever the disk kept of what was not
	// synced: the segment files' entries and the newest producer snapshot
	// were synced by the flush.
	for seed := range uint64(20) {
		crashed := mem.CrashClone(seed)
		l2 := openLogOpts(t, Options{FS: crashed, Dir: testDir, Config: smallConfig()})
		if got := l2.LogEndOffset(); got != leo {
			t.Fatalf("seed %d: after a crash the log ends at %d, want %d", seed, got, leo)
		}
		if got, want := len(l2.segments()), len(l.segments()); got != want {
			t.Fatalf("seed %d: after a crash %d segments, want %d", seed, got, want)
		}
		snaps, err := listSnapshots(crashed, testDir)
		if err != nil || len(snaps) == 0 || snaps[len(snaps)-1] != l.active().base {
			t.Fatalf("seed %d: snapshots after the crash: %v (%v), want the newest at %d", seed, snaps, err, l.active().base)
		}
		readAll(t, l2, 0, leo, 1<<20)
	}
}

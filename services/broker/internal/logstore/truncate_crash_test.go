package logstore

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// hookFS runs a hook before the first rename whose source ends with
// renameSuffix, and another before the first remove whose name ends with
// removeSuffix.
type hookFS struct {
	vfs.FS
	renameSuffix string
	onRename     func()
	removeSuffix string
	onRemove     func()
}

func (f *hookFS) Rename(oldname, newname string) error {
	if f.renameSuffix != "" && strings.HasSuffix(oldname, f.renameSuffix) && f.onRename != nil {
		h := f.onRename
		f.onRename = nil
		h()
	}
	return f.FS.Rename(oldname, newname)
}

func (f *hookFS) Remove(name string) error {
	if f.removeSuffix != "" && strings.HasSuffix(name, f.removeSuffix) && f.onRemove != nil {
		h := f.onRemove
		f.onRemove = nil
		h()
	}
	return f.FS.Remove(name)
}

// checkTruncatedLog checks the invariants a log truncated to want must keep
// after a reload.
func checkTruncatedLog(t *testing.T, r *Log, want int64) {
	t.Helper()
	if r.LogEndOffset() != want {
		t.Errorf("LEO after reload %d, want the truncation point %d (completed swaps %d)", r.LogEndOffset(), want, r.Stats().CompletedSwaps)
	}
	for _, rec := range readRecords(t, r) {
		if rec.offset >= want {
			t.Errorf("record %d (key %s) above the truncation point %d is back", rec.offset, rec.key, want)
			break
		}
	}
	for _, e := range r.EpochEntries() {
		if e.StartOffset > r.LogEndOffset() {
			t.Errorf("epoch entry %v above LEO %d", e, r.LogEndOffset())
		}
	}
	if r.RecoveryPoint() > r.LogEndOffset() {
		t.Errorf("recovery point %d above LEO %d", r.RecoveryPoint(), r.LogEndOffset())
	}
}

// A truncation that lands while a cleaning pass runs wins over the pass even
// across a power loss: the pass commits its swap only under the log's lock,
// after checking no truncation came, so loading never completes a swap that
// would bring truncated records back.
func TestATruncationDuringACleaningPassSurvivesACrash(t *testing.T) {
	mem, clk := newMem(t), newClock()
	hfs := &hookFS{FS: mem, renameSuffix: timeIndexSuffix + cleanedSuffix, removeSuffix: logSuffix + swapSuffix}
	var l *Log
	rp := int64(0) // the Manager's recovery point checkpoint
	persist := func() { rp = l.RecoveryPoint() }
	l, err := Open(Options{FS: hfs, Dir: testDir, Config: compactConfig(), Now: clk.Now,
		RecoveryPointLowered: func() error { persist(); return nil }, PersistRecoveryPoints: func() error { persist(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	leo := writeKeys(t, l, clk, 40, "a", "b", "c")
	truncateTo := l.segments()[0].next - 3 // unclean election: below the HW the pass cleans to
	var want []stored
	hfs.onRename = func() { // the pass is about to commit
		got, err := l.TruncateTo(truncateTo)
		if err != nil {
			t.Errorf("TruncateTo: %v", err)
		}
		truncateTo = got
		want = readRecords(t, l)
	}
	var crashed *vfs.MemFS
	hfs.onRemove = func() { crashed = mem.CrashClone(1) } // swapIn discarding the stale swap: power lost
	flush(t, l)
	_, _ = l.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20})
	l.Abandon()
	if crashed == nil {
		t.Fatal("the pass never reached its discard")
	}
	r := openLogOpts(t, Options{FS: crashed, Dir: testDir, Config: compactConfig(), Now: clk.Now, RecoveryPoint: rp})
	checkTruncatedLog(t, r, truncateTo)
	if got := readRecords(t, r); !slicesEqual(got, want) {
		t.Errorf("reloaded log holds %d records, state %v; the truncated log held %d, state %v", len(got), state(got), len(want), state(want))
	}
}

// A truncation rewrites the cleaner checkpoint at once: after a restart, a
// tombstone appended to the cut segment is dirty, so the pass that drops it
// also drops the older value it deletes (the key does not come back).
func TestATruncationReachesTheCleanerCheckpoint(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"x", val("x-old")}), 0); err != nil {
		t.Fatal(err)
	}
	leo := writeKeys(t, l, clk, 40, "a", "b")
	mustClean(t, l, leo)
	c, _ := l.Cleanable(leo)
	cut := c.FirstDirty - 10
	if _, err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"x", nil}), 0); err != nil {
		t.Fatal(err)
	}
	leo = writeKeys(t, l, clk, 40, "b")
	if err := l.Close(); err != nil { // a clean shutdown; a crash is the same
		t.Fatal(err)
	}
	r := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: cfg, Now: clk.Now, CleanShutdown: true})
	clk.Advance(cfg.DeleteRetention + time.Second)
	mustClean(t, r, leo)
	if v, ok := state(readRecords(t, r))["x"]; ok {
		t.Fatalf("key x is back (%q) after its tombstone, appended after the truncation, was dropped at its first cleaning", v)
	}
}

// The same when the process dies during the truncation, after the cut and
// before the cleaner checkpoint was rewritten: loading brings the
// checkpoint in line with the log it finds (the first dirty offset at most
// the log end, the cut segment no longer cleaned), before the log grows
// past the old first dirty offset and the truncation can no longer be
// told. Before, the tombstone appended after the restart lay below the
// stale first dirty offset in a segment counted as cleaned long ago, and
// its first cleaning dropped it at once, the older value with it kept.
func TestATruncationCutShortOfTheCleanerCheckpointIsCaughtAtLoading(t *testing.T) {
	dir := t.TempDir() + "/t-0"
	clk := newClock()
	cfg := compactConfig()
	l := openLogOpts(t, Options{FS: vfs.OS, Dir: dir, Config: cfg, Now: clk.Now})
	if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"x", val("x-old")}), 0); err != nil {
		t.Fatal(err)
	}
	leo := writeKeys(t, l, clk, 40, "a", "b")
	mustClean(t, l, leo)
	c, _ := l.Cleanable(leo)
	ckpt, err := os.ReadFile(dir + "/" + cleanerCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateTo(c.FirstDirty - 10); err != nil {
		t.Fatal(err)
	}
	rp := l.RecoveryPoint()
	l.Abandon()
	// The crash: the checkpoint's rewrite never happened.
	if err := os.WriteFile(dir+"/"+cleanerCheckpoint, ckpt, 0o644); err != nil {
		t.Fatal(err)
	}
	r := openLogOpts(t, Options{FS: vfs.OS, Dir: dir, Config: cfg, Now: clk.Now, RecoveryPoint: rp})
	if _, err := r.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"x", nil}), 0); err != nil {
		t.Fatal(err)
	}
	leo = writeKeys(t, r, clk, 40, "b")
	clk.Advance(cfg.DeleteRetention + time.Second)
	mustClean(t, r, leo)
	if v, ok := state(readRecords(t, r))["x"]; ok {
		t.Fatalf("key x is back (%q) after its tombstone, appended after the truncation, was dropped at its first cleaning", v)
	}
}

// The producer snapshots a truncation retires stay retired through a crash
// (the renames are synced): a snapshot that came back would be trusted once
// the log grew past it, claim the truncated batches, and acknowledge a retry
// of one as a duplicate without writing it.
func TestRetiredProducerSnapshotsStayRetiredThroughACrash(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			mem, clk := newMem(t), newClock()
			cfg := smallConfig()
			cfg.SegmentBytes = 4096
			l, err := Open(Options{FS: mem, Dir: testDir, Config: cfg, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Abandon()
			spec := func(seq int32) batchSpec {
				s := plain(1, 600, clk.Now().UnixMilli())
				s.pid, s.epoch, s.seq = 1, 0, seq
				return s
			}
			seq := int32(0)
			for l.segments()[len(l.segments())-1].base == 0 || l.LogEndOffset() < l.active().base+2 {
				appendLeader(t, l, spec(seq), 0)
				seq++
			}
			snapAt := l.active().base
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			snaps, _ := listSnapshots(mem, testDir)
			if len(snaps) == 0 || snaps[len(snaps)-1] != snapAt {
				t.Fatalf("snapshots %v, want one at %d", snaps, snapAt)
			}
			cut := snapAt - 2 // drops producer 1's batches at snapAt-2 and on
			firstGone := int32(cut)
			if _, err := l.TruncateTo(cut); err != nil {
				t.Fatal(err)
			}
			// Another producer's small batch of many records: past the old
			// snapshot offset without a roll.
			appendLeader(t, l, plain(20, 1, clk.Now().UnixMilli()), 0)
			if l.LogEndOffset() <= snapAt || len(l.segments()) != 1 {
				t.Fatalf("LEO %d, %d segments", l.LogEndOffset(), len(l.segments()))
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			rp := l.RecoveryPoint()
			crashed := mem.CrashClone(seed)
			r := openLogOpts(t, Options{FS: crashed, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: rp})
			r.mu.Lock()
			e := r.producers.producers[1]
			r.mu.Unlock()
			if e != nil {
				for _, b := range e.Batches {
					if b.LastOffset >= cut {
						t.Errorf("producer 1 claims batch [%d, %d] seq %d, truncated at %d", b.FirstOffset, b.LastOffset, b.FirstSeq, cut)
					}
				}
			}
			info, err := r.AppendAsLeader(spec(firstGone).build(), 0)
			if err != nil || info.Duplicate {
				t.Fatalf("retry of truncated seq %d: duplicate=%v offset %d err %v", firstGone, info.Duplicate, info.FirstOffset, err)
			}
		})
	}
}

// A truncation to an offset inside a gap the cleaner left ends the log where
// the last batch before the gap ends, as loading finds it after a crash: the
// log never claims offsets it holds nothing for (a follower would fetch from
// there, skipping the leader's records in between).
func TestTruncationIntoACompactionGap(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	leo := writeKeys(t, l, clk, 40, "a", "b")
	mustClean(t, l, leo)
	// Find a gap between two batches.
	gapFrom, gapTo := int64(-1), int64(-1)
	prev := int64(-1)
	for _, s := range l.segments() {
		walkHeaders(s, 0, s.size.Load(), func(h recordbatch.Batch, _, _ int64) bool {
			if prev >= 0 && h.BaseOffset() > prev+1 && gapFrom < 0 {
				gapFrom, gapTo = prev, h.BaseOffset()
			}
			prev = h.NextOffset()
			return true
		})
	}
	if gapFrom < 0 || gapTo-gapFrom < 2 {
		t.Fatalf("no gap: %d..%d", gapFrom, gapTo)
	}
	off := gapFrom + 1 // inside the gap
	newLEO, err := l.TruncateTo(off)
	if err != nil {
		t.Fatal(err)
	}
	if newLEO != gapFrom && newLEO != off {
		t.Errorf("TruncateTo(%d) returned %d, want %d (the gap start) or %d", off, newLEO, gapFrom, off)
	}
	if newLEO > off || l.LogEndOffset() > off {
		t.Errorf("TruncateTo(%d) inside the gap [%d, %d) returned LEO %d (log LEO %d): above the offset", off, gapFrom, gapTo, newLEO, l.LogEndOffset())
	}
	for _, rec := range readRecords(t, l) {
		if rec.offset >= off {
			t.Errorf("record %d above the truncation point %d", rec.offset, off)
		}
	}
	before := l.LogEndOffset()
	l.Abandon()
	r := openLogOpts(t, Options{FS: mem.CrashClone(1), Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: l.RecoveryPoint()})
	if r.LogEndOffset() != before {
		t.Logf("LEO %d before the crash, %d after (gap start %d)", before, r.LogEndOffset(), gapFrom)
	}
	checkTruncatedLog(t, r, min(before, r.LogEndOffset()))
}

// A truncation whose lowered recovery point cannot be checkpointed fails
// (KAFKA_STORAGE_ERROR) instead of being acknowledged: with a stale, higher
// recovery point on disk, loading after a crash would trust the data
// appended after the truncation without validating it, and serve a torn
// batch.
func TestATruncationThatCannotCheckpointItsRecoveryPointFails(t *testing.T) {
	mem, clk := newMem(t), newClock()
	ffs := vfs.NewFaultFS(mem)
	var storageErrs []error
	m, err := OpenManager(ManagerOptions{FS: ffs, Dir: "/data", NoBackground: true, Now: clk.Now,
		OnStorageError: func(err error) { storageErrs = append(storageErrs, err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Abandon()
	cfg := smallConfig()
	l, err := m.GetOrCreate(tpA, cfg)
	if err != nil {
		t.Fatal(err)
	}
	leo := fill(t, l, 40, 3, 40)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckpointRecoveryPoints(); err != nil {
		t.Fatal(err)
	}
	ffs.Inject(vfs.Fault{Ops: vfs.OpRename, Path: recoveryCheckpointFile, Err: fmt.Errorf("injected EIO")})
	cutSeg := l.segments()[1]
	cut := cutSeg.base + 3
	newLEO, err := l.TruncateTo(cut)
	ckpt, _ := ReadOffsetCheckpoint(mem, "/data", recoveryCheckpointFile)
	if err == nil && ckpt[tpA] > newLEO {
		t.Errorf("TruncateTo(%d) returned LEO %d and no error, but the recovery point checkpoint still says %d (LEO before %d); storage errors reported: %d",
			cut, newLEO, ckpt[tpA], leo, len(storageErrs))
	}
	if err != nil {
		return
	}
	// Consequence: big batches appended after the truncation, rolled past the
	// cut segment, whose background flush has not run yet.
	release := make(chan struct{})
	ffs.Inject(vfs.Fault{Ops: vfs.OpSync, Path: offsetName(cutSeg.base, logSuffix), Stall: release})
	defer close(release)
	cutPos := cutSeg.size.Load()
	for len(l.segments()) < 4 {
		appendLeader(t, l, plain(3, 400, clk.Now().UnixMilli()), 0)
	}
	var crashed *vfs.MemFS
	for seed := uint64(1); ; seed++ {
		// One where the cut segment's new data and the later segments
		// survived (a power loss may keep unsynced data whole).
		crashed = mem.CrashClone(seed)
		d, _ := vfs.ReadFile(crashed, "/data/"+tpA.String()+"/"+offsetName(cutSeg.base, logSuffix))
		ents, _ := crashed.ReadDir("/data/" + tpA.String())
		n := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), logSuffix) {
				n++
			}
		}
		okIx := true
		for _, suf := range []string{indexSuffix, timeIndexSuffix} {
			name := "/data/" + tpA.String() + "/" + offsetName(cutSeg.base, suf)
			a, _ := vfs.ReadFile(mem, name)
			b, _ := vfs.ReadFile(crashed, name)
			okIx = okIx && string(a) == string(b)
		}
		if int64(len(d)) == cutSeg.size.Load() && n == len(l.segments()) && okIx {
			t.Logf("crash seed %d", seed)
			break
		}
		if seed > 2000 {
			t.Fatal("no crash outcome keeps the new data")
		}
	}
	// The power loss tore a batch the cut segment got after the cut: one
	// 512-byte sector of its body has the durable contents (nothing: zeros).
	p := "/data/" + tpA.String() + "/" + offsetName(cutSeg.base, logSuffix)
	data, err := vfs.ReadFile(crashed, p)
	if err != nil {
		t.Fatal(err)
	}
	torn := false
	// Walk positions by hand.
	for pos := cutPos; pos < int64(len(data)); {
		n, ok := recordbatch.PeekSize(data[pos:])
		if !ok || pos+n > int64(len(data)) {
			break
		}
		sec := (pos + 64 + 511) / 512 * 512
		if sec+512 <= pos+n {
			copy(data[sec:sec+512], make([]byte, 512))
			torn = true
			break
		}
		pos += n
	}
	if !torn {
		t.Fatal("no batch spans a whole sector")
	}
	f, _ := crashed.Create(p)
	f.WriteAt(data, 0)
	f.Sync()
	f.Close()
	ckpt, _ = ReadOffsetCheckpoint(crashed, "/data", recoveryCheckpointFile)
	r := openLogOpts(t, Options{FS: crashed, Dir: "/data/" + tpA.String(), Config: cfg, Now: clk.Now, RecoveryPoint: ckpt[tpA], LogStartOffset: 0})
	for _, sg := range r.segments() {
		t.Logf("segment %d next %d size %d", sg.base, sg.next, sg.size.Load())
	}
	t.Logf("cut segment %d cutPos %d; reopened stats %+v", cutSeg.base, cutPos, r.Stats())
	for off := r.LogStartOffset(); off < r.LogEndOffset(); {
		res, err := r.Read(off, 1, r.LogEndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b := recordbatch.Batch(res.Records)
		if err := b.Validate(); err != nil {
			t.Fatalf("after the crash (recovery point checkpoint %d, truncated to %d) Read(%d) serves a torn batch: %v", ckpt[tpA], newLEO, off, err)
		}
		off = res.NextOffset
	}
}

// A power loss during a truncation, after the cut and before the recovery
// point checkpoint's rewrite, leaves the checkpoint above the log end.
// Loading lowers the recovery point and checkpoints it before the log is
// served, synced: a second power loss right after the restart finds it at
// most the log end. Before, it stayed stale until the next periodic write
// (up to a minute), and the segments below it, written after the cut and
// perhaps never synced, would have been trusted with a sanity check only.
func TestARecoveryPointLoweredAtLoadingIsCheckpointedAtOnce(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		mem := newMem(t)
		hfs := &hookFS{FS: mem, renameSuffix: recoveryCheckpointFile + ".tmp"}
		m := openManager(t, hfs, &hwTable{m: map[TopicPartition]int64{}})
		l, err := m.GetOrCreate(tpA, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		leo := fill(t, l, 20, 3, 40)
		if err := errors.Join(l.Flush(), m.CheckpointRecoveryPoints()); err != nil {
			t.Fatal(err)
		}
		var crashed *vfs.MemFS
		hfs.onRename = func() { crashed = mem.CrashClone(seed) } // the truncation's checkpoint: power lost
		if _, err := l.TruncateTo(leo / 2); err != nil {
			t.Fatal(err)
		}
		m.Abandon()
		if crashed == nil {
			t.Fatal("the truncation never checkpointed its recovery point")
		}
		if rps, err := ReadOffsetCheckpoint(crashed, "/data", recoveryCheckpointFile); err != nil || rps[tpA] != leo {
			t.Fatalf("seed %d: checkpoint after the first power loss %v (%v), want the stale %d", seed, rps, err, leo)
		}

		m2 := openManager(t, crashed, &hwTable{m: map[TopicPartition]int64{}})
		r, ok := m2.Log(tpA)
		if !ok {
			t.Fatalf("seed %d: offline: %v", seed, m2.Offline())
		}
		end := r.LogEndOffset()
		if end >= leo {
			t.Fatalf("seed %d: reloaded LEO %d, want the cut below %d", seed, end, leo)
		}
		again := crashed.CrashClone(seed + 1000) // the second power loss, before any periodic write
		m2.Abandon()
		rps, err := ReadOffsetCheckpoint(again, "/data", recoveryCheckpointFile)
		if err != nil {
			t.Fatal(err)
		}
		if rps[tpA] > end {
			t.Fatalf("seed %d: recovery point checkpoint %d after a second power loss, above the reloaded log end %d", seed, rps[tpA], end)
		}
	}
}

package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// kv is one record of a compacted topic; a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

func val(s string) []byte { return []byte(s) }

func kvBatch(ts int64, recs ...kv) []byte {
	var b recordbatch.Builder
	for i, r := range recs {
		b.Append(recordbatch.Record{Timestamp: ts + int64(i), Key: []byte(r.key), Value: r.value})
	}
	return bytes.Clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
}

func compactConfig() Config {
	c := smallConfig()
	c.CleanupPolicy = "compact"
	c.DeleteRetention = time.Hour
	return c
}

// stored is a record as read back, with its offset.
type stored struct {
	offset int64
	key    string
	value  string
	tomb   bool
}

// readRecords reads every record from the log start to the LEO, checking
// each batch validates as stored and offsets only increase.
func readRecords(t testing.TB, l *Log) []stored {
	t.Helper()
	var out []stored
	next := l.LogStartOffset()
	last := int64(-1)
	for next < l.LogEndOffset() {
		res, err := l.Read(next, 1000, l.LogEndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("Read(%d) returned nothing below %d", next, l.LogEndOffset())
		}
		for b, err := range recordbatch.All(res.Records) {
			if err == nil {
				err = b.ValidateStored()
			}
			if err != nil {
				t.Fatalf("Read(%d): %v", next, err)
			}
			if b.BaseOffset() <= last {
				t.Fatalf("batch at %d does not follow %d", b.BaseOffset(), last)
			}
			last = b.LastOffset()
			for r, err := range b.Records() {
				if err != nil {
					t.Fatal(err)
				}
				if r.Offset >= next {
					out = append(out, stored{offset: r.Offset, key: string(r.Key), value: string(r.Value), tomb: r.Value == nil})
				}
			}
		}
		next = res.NextOffset
	}
	return out
}

// state replays records into key -> latest value (tombstones delete).
func state(recs []stored) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		if r.tomb {
			delete(m, r.key)
		} else {
			m[r.key] = r.value
		}
	}
	return m
}

// writeKeys appends n single-batch rounds cycling over keys, every value
// naming its round, and returns the LEO.
func writeKeys(t testing.TB, l *Log, clk *clock, rounds int, keys ...string) int64 {
	t.Helper()
	for i := range rounds {
		var recs []kv
		for _, k := range keys {
			recs = append(recs, kv{k, val(fmt.Sprintf("%s-%d-%s", k, i, strings.Repeat("x", 40)))})
		}
		if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), recs...), 0); err != nil {
			t.Fatal(err)
		}
	}
	return l.LogEndOffset()
}

func mustClean(t testing.TB, l *Log, hw int64) CleanResult {
	t.Helper()
	flush(t, l)
	res, err := l.Clean(CleanOptions{UpperBound: hw, MapBytes: 1 << 20})
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	return res
}

func TestCleanKeepsLatestPerKey(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	leo := writeKeys(t, l, clk, 40, "a", "b", "c", "d")
	before := readRecords(t, l)
	byOffset := map[int64]stored{}
	for _, r := range before {
		byOffset[r.offset] = r
	}
	segsBefore := len(l.segments())

	res := mustClean(t, l, leo)
	if res.RecordsRemoved == 0 || res.BytesWritten >= res.BytesRead || res.SegmentsBefore != segsBefore-1 {
		t.Fatalf("nothing compacted: %+v, %d segments", res, segsBefore)
	}
	after := readRecords(t, l)
	if !maps.Equal(state(before), state(after)) {
		t.Fatalf("state changed:\nbefore %v\nafter  %v", state(before), state(after))
	}
	// Offsets never change: every surviving record is the one written there.
	seen := map[string]int{}
	for _, r := range after {
		if byOffset[r.offset] != r {
			t.Fatalf("record at %d is %+v, was %+v", r.offset, r, byOffset[r.offset])
		}
		seen[r.key]++
	}
	if len(after) >= len(before) {
		t.Fatalf("%d records before, %d after", len(before), len(after))
	}
	if l.LogEndOffset() != leo || l.LogStartOffset() != 0 {
		t.Fatalf("LEO %d (want %d), log start %d", l.LogEndOffset(), leo, l.LogStartOffset())
	}
	// A fetch from any offset gets the next record still there.
	for off := int64(0); off < leo; off++ {
		res, err := l.Read(off, 1, leo)
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("Read(%d) = %d bytes, %v", off, len(res.Records), err)
		}
		var first int64 = -1
		for r := range recordbatch.Batch(res.Records).Records() {
			if r.Offset >= off {
				first = r.Offset
				break
			}
		}
		want := int64(-1)
		for _, r := range after {
			if r.offset >= off {
				want = r.offset
				break
			}
		}
		if b := recordbatch.Batch(res.Records); first != want && !(first == -1 && b.NextOffset() > off) {
			t.Fatalf("Read(%d) starts at record %d, want %d", off, first, want)
		}
	}
	// The next pass merges the small cleaned segments.
	leo = writeKeys(t, l, clk, 40, "a", "b", "c", "d")
	after = readRecords(t, l)
	for _, r := range after {
		byOffset[r.offset] = r
	}
	segsBefore = len(l.segments())
	res = mustClean(t, l, leo)
	if res.SegmentsAfter >= res.SegmentsBefore || len(l.segments()) >= segsBefore {
		t.Fatalf("small cleaned segments not merged: %+v, %d segments before, %d after", res, segsBefore, len(l.segments()))
	}
	if got := readRecords(t, l); !maps.Equal(state(got), state(after)) {
		t.Fatal("merging changed the state")
	}
	after = readRecords(t, l)
	// Reopened, cleanly and after a crash, it reads the same.
	for _, clean := range []bool{true, false} {
		rp := l.RecoveryPoint() // what the Manager's checkpoint holds: cleaning persists it before each swap
		if clean {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			l.Abandon()
		}
		l = openLogOpts(t, Options{FS: mem, Dir: testDir, Config: compactConfig(), Now: clk.Now, CleanShutdown: clean, RecoveryPoint: rp})
		if got := readRecords(t, l); !slicesEqual(got, after) || l.Stats().RecoveredTruncations != 0 || l.LogEndOffset() != leo {
			t.Fatalf("reopened (clean=%v): %d records, truncations %d, LEO %d", clean, len(got), l.Stats().RecoveredTruncations, l.LogEndOffset())
		}
		if clean && l.Stats().RebuiltIndexes != 0 {
			t.Fatalf("a clean reopen rebuilt %d indexes of cleaned segments", l.Stats().RebuiltIndexes)
		}
	}
}

func slicesEqual(a, b []stored) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCleanTombstonesAfterDeleteRetention(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	writeKeys(t, l, clk, 10, "a", "b")
	if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"a", nil}), 0); err != nil {
		t.Fatal(err)
	}
	leo := writeKeys(t, l, clk, 30, "c", "d") // seals the tombstone's segment
	tombstones := func() int {
		n := 0
		for _, r := range readRecords(t, l) {
			if r.tomb {
				n++
			}
		}
		return n
	}

	mustClean(t, l, leo)
	if n := tombstones(); n != 1 {
		t.Fatalf("first cleaning left %d tombstones, want 1 (it is kept for delete.retention.ms)", n)
	}
	if _, ok := state(readRecords(t, l))["a"]; ok {
		t.Fatal("key a is back")
	}
	clk.Advance(cfg.DeleteRetention - time.Second)
	c, err := l.Cleanable(leo)
	if err != nil || c.TombstonesDue || c.NeedsCleaning(cfg) {
		t.Fatalf("before delete.retention.ms: %+v, %v", c, err)
	}
	if res := mustClean(t, l, leo); res.TombstonesRemoved != 0 || tombstones() != 1 {
		t.Fatalf("tombstone removed %s before delete.retention.ms: %+v", time.Second, res)
	}
	clk.Advance(time.Second)
	if c, _ := l.Cleanable(leo); !c.TombstonesDue || !c.NeedsCleaning(cfg) {
		t.Fatalf("an idle log with an expired tombstone does not ask for cleaning: %+v", c)
	}
	res := mustClean(t, l, leo)
	if res.TombstonesRemoved != 1 || tombstones() != 0 {
		t.Fatalf("after delete.retention.ms: %+v, %d tombstones left", res, tombstones())
	}
	if _, ok := state(readRecords(t, l))["a"]; ok {
		t.Fatal("key a is back after its tombstone went")
	}
}

func TestCleanDirtyRatio(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	writeKeys(t, l, clk, 40, "a", "b", "c", "d")
	clk.Advance(cfg.SegmentMs) // segment.ms rolls the active segment at the next append
	leo := writeKeys(t, l, clk, 1, "e")
	mustClean(t, l, leo)
	// A little new dirty data over a larger clean part: below the ratio.
	writeKeys(t, l, clk, 1, "e")
	clk.Advance(cfg.SegmentMs)
	leo = writeKeys(t, l, clk, 1, "e")
	flush(t, l)
	c, err := l.Cleanable(leo)
	if err != nil {
		t.Fatal(err)
	}
	if c.DirtyBytes == 0 || c.Ratio >= cfg.MinCleanableDirtyRatio || c.NeedsCleaning(cfg) {
		t.Fatalf("expected a dirty ratio below %v: %+v", cfg.MinCleanableDirtyRatio, c)
	}
	cfg.MinCleanableDirtyRatio = c.Ratio
	if !c.NeedsCleaning(cfg) {
		t.Fatalf("ratio %v does not reach min %v", c.Ratio, cfg.MinCleanableDirtyRatio)
	}
	// Nothing at or above the upper bound (the HW) is cleanable.
	c0, _ := l.Cleanable(0)
	if c0.DirtyBytes != 0 || c0.CleanBytes != 0 {
		t.Fatalf("cleanable below HW 0: %+v", c0)
	}
}

func TestCleanMinCompactionLag(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	cfg.MinCompactionLag = time.Hour
	l := openLog(t, mem, cfg, clk)
	leo := writeKeys(t, l, clk, 40, "a", "b")
	if res := mustClean(t, l, leo); res.SegmentsBefore != 0 || res.RecordsRemoved != 0 {
		t.Fatalf("records younger than min.compaction.lag.ms were cleaned: %+v", res)
	}
	clk.Advance(2 * time.Hour)
	if res := mustClean(t, l, leo); res.RecordsRemoved == 0 {
		t.Fatalf("old enough records were not cleaned: %+v", res)
	}
}

func TestCleanBoundedMapTakesSeveralPasses(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	// Six new keys a round, each round's keys rewritten by the next round
	// but one: the map fills after two rounds.
	for i := range 20 {
		var recs []kv
		for j := range 6 {
			recs = append(recs, kv{fmt.Sprint("k", i%10, "-", j), val(fmt.Sprint(i, strings.Repeat("z", 30)))})
		}
		if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), recs...), 0); err != nil {
			t.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	before := readRecords(t, l)
	small := CleanOptions{UpperBound: leo, MapBytes: 12 * offsetMapEntrySize}
	flush(t, l)
	res, err := l.Clean(small)
	if err != nil {
		t.Fatal(err)
	}
	if res.MapEnd != 12 {
		t.Fatalf("map end %d, want 12 (two batches of six keys)", res.MapEnd)
	}
	for range 20 {
		if res, err = l.Clean(small); err != nil {
			t.Fatal(err)
		}
	}
	after := readRecords(t, l)
	if !maps.Equal(state(before), state(after)) || len(after) >= len(before) {
		t.Fatalf("state changed or nothing removed: %d records before, %d after", len(before), len(after))
	}
	// A map too small for one batch says so, and changes nothing.
	leo = writeKeys(t, l, clk, 30, "q", "r", "s", "t")
	flush(t, l)
	_, err = l.Clean(CleanOptions{UpperBound: leo, MapBytes: 3 * offsetMapEntrySize})
	if err == nil || !strings.Contains(err.Error(), "log.cleaner.dedupe.buffer.size 72 holds 3 keys: too few for one batch") {
		t.Fatalf("tiny map: %v", err)
	}
}

func TestCompactedTopicRefusesRecordsWithoutKey(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: 1, Key: []byte("k"), Value: val("v")})
	b.Append(recordbatch.Record{Timestamp: 2, Value: val("no key")})
	_, err := l.AppendAsLeader(bytes.Clone(b.Build(-1, -1, -1)), 0)
	wantCode(t, err, kerr.InvalidRecord)
	if !strings.Contains(err.Error(), "batch 0, record 1 has no key: a topic with cleanup.policy=compact needs one on every record") {
		t.Fatalf("message: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("LEO %d after a refused append", l.LogEndOffset())
	}
	// The same batch goes into a delete-policy log.
	d := openLogOpts(t, Options{FS: mem, Dir: "/data/d-0", Config: smallConfig()})
	if _, err := d.AppendAsLeader(bytes.Clone(b.Build(-1, -1, -1)), 0); err != nil {
		t.Fatal(err)
	}
}

func TestCompactOnlyPolicySkipsRetention(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	cfg.RetentionMs = time.Millisecond
	cfg.RetentionBytes = 0
	l := openLog(t, mem, cfg, clk)
	leo := writeKeys(t, l, clk, 40, "a")
	clk.Advance(time.Hour)
	if n, err := l.DeleteOldSegments(leo); err != nil || n != 0 {
		t.Fatalf("retention deleted %d segments of a compact-only log: %v", n, err)
	}
	cfg.CleanupPolicy = "compact,delete"
	l.SetConfig(cfg)
	if n, err := l.DeleteOldSegments(leo); err != nil || n == 0 {
		t.Fatalf("compact,delete: retention deleted %d segments: %v", n, err)
	}
}

func TestCleanIdempotentProducerKeepsLastBatch(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	var seq int32
	for i := range 30 {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: clk.Now().UnixMilli(), Key: []byte("p"), Value: val(fmt.Sprint("v", i, strings.Repeat("y", 60)))})
		if _, err := l.AppendAsLeader(bytes.Clone(b.Build(9, 0, seq)), 0); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	// Another producer's record supersedes producer 9's last one.
	leo := writeKeys(t, l, clk, 30, "p")
	mustClean(t, l, leo)
	// Producer 9's last batch (sequence 29) is kept, empty if need be.
	found := false
	for _, s := range l.segments() {
		walkHeaders(s, 0, s.size.Load(), func(h recordbatch.Batch, _, _ int64) bool {
			if h.ProducerID() == 9 && h.LastSequence() == 29 {
				found = true
			}
			return true
		})
	}
	if !found {
		t.Fatal("the last batch of producer 9 was removed")
	}
	// Its retry is still recognised after a clean restart (reopened as
	// the log manager reopens a log it closed cleanly), and its next batch
	// follows on.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLogOpts(t, Options{FS: mem, Dir: testDir, Config: compactConfig(), Now: clk.Now, CleanShutdown: true, RecoveryPoint: leo})
	if l.LogEndOffset() != leo {
		t.Fatalf("reopened with LEO %d, want %d", l.LogEndOffset(), leo)
	}
	var retry recordbatch.Builder
	retry.Append(recordbatch.Record{Timestamp: clk.Now().UnixMilli(), Key: []byte("p"), Value: val("v29")})
	if info, err := l.AppendAsLeader(bytes.Clone(retry.Build(9, 0, 29)), 0); err != nil || !info.Duplicate {
		t.Fatalf("a retry of producer 9's last batch after the restart: %+v, %v; want a duplicate", info, err)
	}
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: clk.Now().UnixMilli(), Key: []byte("p"), Value: val("next")})
	if _, err := l.AppendAsLeader(bytes.Clone(b.Build(9, 0, 30)), 0); err != nil {
		t.Fatalf("producer 9's next sequence: %v", err)
	}
}

// TestFollowerFetchesCompactedLeader: compaction is per replica; a new
// follower copies the leader's compacted log, gaps and all, and reads the
// same; the follower's own cleaner works on its own copy.
func TestFollowerFetchesCompactedLeader(t *testing.T) {
	mem, clk := newMem(t), newClock()
	leader := openLog(t, mem, compactConfig(), clk)
	leo := writeKeys(t, leader, clk, 40, "a", "b", "c")
	mustClean(t, leader, leo)
	want := readRecords(t, leader)

	fcfg := compactConfig()
	fcfg.CleanupPolicy = "delete" // even a follower that does not know the policy yet takes the gaps
	follower := openLogOpts(t, Options{FS: mem, Dir: "/data/f-0", Config: fcfg, Now: clk.Now})
	for next := int64(0); next < leo; {
		res, err := leader.Read(next, 700, leo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollowerUnflushed(bytes.Clone(res.Records)); err != nil {
			t.Fatalf("follower append at %d: %v", next, err)
		}
		next = res.NextOffset
	}
	if got := readRecords(t, follower); !slicesEqual(got, want) || follower.LogEndOffset() != leo {
		t.Fatalf("follower has %d records (leader %d), LEO %d", len(got), len(want), follower.LogEndOffset())
	}
	// A crash before the copy was flushed (appended as the fetcher does,
	// before its FlushGaps): a gap above the recovery point may be a lost
	// unsynced tail, so recovery ends the log at the first one (the
	// follower fetches the rest again); once flushed, gaps stand.
	follower.Abandon()
	follower = openLogOpts(t, Options{FS: mem, Dir: "/data/f-0", Config: fcfg, Now: clk.Now})
	firstGap := int64(0)
	for _, r := range want {
		if r.offset != firstGap {
			break
		}
		firstGap++
	}
	if follower.LogEndOffset() > firstGap || follower.Stats().RecoveredTruncations != 1 {
		t.Fatalf("unflushed gapped copy after a crash: LEO %d (first gap at %d), %d truncations", follower.LogEndOffset(), firstGap, follower.Stats().RecoveredTruncations)
	}
	for next := follower.LogEndOffset(); next < leo; {
		res, err := leader.Read(next, 700, leo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(bytes.Clone(res.Records)); err != nil {
			t.Fatalf("follower refetch at %d: %v", next, err)
		}
		next = res.NextOffset
	}
	flush(t, follower)
	rp := follower.RecoveryPoint()
	follower.Abandon()
	follower = openLogOpts(t, Options{FS: mem, Dir: "/data/f-0", Config: fcfg, Now: clk.Now, RecoveryPoint: rp})
	if got := readRecords(t, follower); !slicesEqual(got, want) || follower.Stats().RecoveredTruncations != 0 {
		t.Fatalf("follower after a crash: %d records, %d truncations", len(got), follower.Stats().RecoveredTruncations)
	}
	// An overlap is still refused.
	res, _ := leader.Read(0, 1, leo)
	if _, err := follower.AppendAsFollower(bytes.Clone(res.Records)); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("overlap: %v", err)
	}
	// The follower's own cleaning pass keeps the same state.
	follower.SetConfig(compactConfig())
	mustClean(t, follower, leo)
	if !maps.Equal(state(readRecords(t, follower)), state(want)) {
		t.Fatal("follower's cleaning changed its state")
	}
}

// TestCleanCrashAtEveryStep fails the file system at every mutating
// operation of a cleaning pass in turn, takes what a power loss could leave
// (several seeds each), reopens, and checks the log reads exactly the same
// keys and values, at the same offsets as before or a subset of them, with
// indexes that find every offset.
func TestCleanCrashAtEveryStep(t *testing.T) {
	build := func() (*vfs.MemFS, *vfs.FaultFS, *Log, *clock, []stored, int64) {
		mem, clk := newMem(t), newClock()
		ffs := vfs.NewFaultFS(mem)
		l, err := Open(Options{FS: ffs, Dir: testDir, Config: compactConfig(), Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		writeKeys(t, l, clk, 30, "a", "b", "c")
		if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"b", nil}), 0); err != nil {
			t.Fatal(err)
		}
		leo := writeKeys(t, l, clk, 20, "c", "d")
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		return mem, ffs, l, clk, readRecords(t, l), leo
	}
	errCrash := errors.New("power lost")
	mutating := vfs.OpCreate | vfs.OpWrite | vfs.OpSync | vfs.OpTruncate | vfs.OpRename | vfs.OpRemove | vfs.OpSyncDir | vfs.OpMkdir
	completed, discarded := 0, 0
	for step := 0; ; step++ {
		mem, ffs, l, clk, before, leo := build()
		byOffset := map[int64]stored{}
		for _, r := range before {
			byOffset[r.offset] = r
		}
		ffs.Inject(vfs.Fault{Ops: mutating, Skip: step, Err: errCrash})
		_, err := l.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20})
		l.Abandon()
		if err == nil {
			if step < 10 {
				t.Fatalf("a pass needs more than %d file operations", step)
			}
			t.Logf("%d crash points: %d recoveries completed a swap, %d discarded one", step, completed, discarded)
			if completed == 0 || discarded == 0 {
				t.Fatal("the crash points missed the committed or the uncommitted case")
			}
			return
		}
		if !errors.Is(err, errCrash) {
			t.Fatalf("step %d: %v", step, err)
		}
		for seed := uint64(1); seed <= 4; seed++ {
			crashed := mem.CrashClone(seed + uint64(step)*10)
			r, err := Open(Options{FS: crashed, Dir: testDir, Config: compactConfig(), Now: clk.Now, RecoveryPoint: leo})
			if err != nil {
				t.Fatalf("step %d seed %d: reopen: %v", step, seed, err)
			}
			got := readRecords(t, r)
			if !maps.Equal(state(got), state(before)) {
				t.Fatalf("step %d seed %d: state changed:\nbefore %v\nafter  %v", step, seed, state(before), state(got))
			}
			for _, rec := range got {
				if byOffset[rec.offset] != rec {
					t.Fatalf("step %d seed %d: record at %d is %+v, was %+v", step, seed, rec.offset, rec, byOffset[rec.offset])
				}
			}
			if r.LogEndOffset() != leo || r.Stats().RecoveredTruncations != 0 {
				t.Fatalf("step %d seed %d: LEO %d (want %d), truncations %d", step, seed, r.LogEndOffset(), leo, r.Stats().RecoveredTruncations)
			}
			for off := int64(0); off < leo; off += 7 {
				if res, err := r.Read(off, 1, leo); err != nil || len(res.Records) == 0 {
					t.Fatalf("step %d seed %d: Read(%d): %d bytes, %v", step, seed, off, len(res.Records), err)
				}
			}
			ents, _ := crashed.ReadDir(testDir)
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
					t.Fatalf("step %d seed %d: %s left behind", step, seed, e.Name())
				}
			}
			if r.Stats().CompletedSwaps > 0 {
				completed++
			} else {
				discarded++
			}
			// And the next pass finishes the job.
			if _, err := r.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20}); err != nil {
				t.Fatalf("step %d seed %d: cleaning after recovery: %v", step, seed, err)
			}
			if !maps.Equal(state(readRecords(t, r)), state(before)) {
				t.Fatalf("step %d seed %d: state changed by the pass after recovery", step, seed)
			}
			r.Close()
		}
	}
}

// TestCleanCountsWhatLeftTheLog fails a pass at every file operation in
// turn and checks that what it reports removed (in its result and in each
// Swapped call, which the Manager's counters follow) is exactly what left
// the log: groups swapped in before the failure count, the group it failed
// in does not.
func TestCleanCountsWhatLeftTheLog(t *testing.T) {
	errDisk := errors.New("disk failed")
	mutating := vfs.OpCreate | vfs.OpWrite | vfs.OpSync | vfs.OpTruncate | vfs.OpRename | vfs.OpRemove | vfs.OpSyncDir | vfs.OpMkdir
	partial := 0 // failed passes, the log still readable, that had swapped some groups in
	for step := 0; ; step++ {
		clk := newClock()
		ffs := vfs.NewFaultFS(newMem(t))
		l, err := Open(Options{FS: ffs, Dir: testDir, Config: compactConfig(), Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		leo := writeKeys(t, l, clk, 60, "a", "b", "c")
		flush(t, l)
		before := len(readRecords(t, l))
		ffs.Inject(vfs.Fault{Ops: mutating, Skip: step, Count: 1, Err: errDisk})
		var swapped, swappedRemoved int64
		res, err := l.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20, Swapped: func(g CleanResult) {
			swapped++
			swappedRemoved += g.RecordsRemoved
		}})
		after, rerr := countRecords(l)
		l.Abandon()
		if rerr != nil {
			// The failure failed the log (a directory sync after a
			// rename): what the files hold is for loading to decide.
			continue
		}
		removed := int64(before - after)
		if res.RecordsRemoved != removed || swappedRemoved != removed {
			t.Fatalf("step %d (err %v): %d records left the log, the result says %d, the Swapped calls %d",
				step, err, removed, res.RecordsRemoved, swappedRemoved)
		}
		// The fault may fall on a background unlink of a retired file,
		// which fails nothing: the pass is done only when no fault fired.
		if err == nil && ffs.Fired() == 0 {
			if removed == 0 || partial == 0 {
				t.Fatalf("%d steps: removed %d, %d failed passes had swapped a group in", step, removed, partial)
			}
			return
		}
		if swapped > 0 {
			partial++
		}
	}
}

// countRecords counts the records from the log start to the LEO.
func countRecords(l *Log) (int, error) {
	n := 0
	for next := l.LogStartOffset(); next < l.LogEndOffset(); {
		res, err := l.Read(next, 1<<20, l.LogEndOffset())
		if err != nil {
			return 0, err
		}
		for b, err := range recordbatch.All(res.Records) {
			if err != nil {
				return 0, err
			}
			for r, err := range b.Records() {
				if err != nil {
					return 0, err
				}
				if r.Offset >= next {
					n++
				}
			}
		}
		next = res.NextOffset
	}
	return n, nil
}

// flush makes everything durable: the cleaner works only below the recovery
// point, which rolls move forward in the background.
func flush(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A segment from which nothing is removed still starts its tombstones'
// clock: they go delete.retention.ms after that pass.
func TestCleanTombstoneInUntouchedSegment(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	for i := range 8 {
		if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{fmt.Sprint("u", i), val(strings.Repeat("v", 200))}), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"gone", nil}), 0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(cfg.SegmentMs)
	leo := writeKeys(t, l, clk, 1, "x") // rolls: the unique keys and the tombstone are sealed
	if res := mustClean(t, l, leo); res.RecordsRemoved != 0 || res.BytesWritten != 0 {
		t.Fatalf("a segment of unique keys was rewritten: %+v", res)
	}
	clk.Advance(cfg.DeleteRetention)
	c, _ := l.Cleanable(leo)
	if !c.TombstonesDue || !c.NeedsCleaning(cfg) {
		t.Fatalf("the untouched segment's tombstone is not due: %+v", c)
	}
	if res := mustClean(t, l, leo); res.TombstonesRemoved != 1 {
		t.Fatalf("tombstone not removed: %+v", res)
	}
	for _, r := range readRecords(t, l) {
		if r.tomb {
			t.Fatalf("tombstone at %d still there", r.offset)
		}
	}
}

// A follower of a compacted topic copies its cleaned leader's log, gaps and
// all, and its own cleaner has not run yet. After a restart, killed or
// clean, the log is whole: loading does not know the topic's config (the
// broker opens logs with the defaults and configures them after), so the
// follower marks its log as one that may hold gaps when it stores the first
// gap. Before, it did so only when its config was not compacted, and
// loading cut the log at its first gap, to nothing here.
func TestAFollowersCompactedCopyKeepsItsGapsThroughARestart(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(map[bool]string{false: "killed", true: "clean"}[clean], func(t *testing.T) {
			mem, clk := newMem(t), newClock()
			hw := &hwTable{m: map[TopicPartition]int64{}}
			m, err := OpenManager(ManagerOptions{FS: mem, Dir: "/data", HighWatermark: hw.get, NoBackground: true, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			leaderTP, followerTP := TopicPartition{"ledger", 0}, TopicPartition{"ledger", 1}
			leader, _ := m.GetOrCreate(leaderTP, compactConfig())
			leo := writeKeys(t, leader, clk, 400, "a", "b", "c")
			mustClean(t, leader, leo)
			want := readRecords(t, leader)
			fcfg := compactConfig()
			fcfg.IndexIntervalBytes = 4096 // no index entry in a segment's last 4 KiB
			follower, _ := m.GetOrCreate(followerTP, fcfg)
			for next := int64(0); next < leo; {
				res, err := leader.Read(next, 700, leo)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := follower.AppendAsFollower(bytes.Clone(res.Records)); err != nil {
					t.Fatal(err)
				}
				next = res.NextOffset
			}
			flush(t, follower)
			if err := m.CheckpointRecoveryPoints(); err != nil {
				t.Fatal(err)
			}
			if clean {
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				m.Abandon()
			}
			m2, err := OpenManager(ManagerOptions{FS: mem, Dir: "/data", NoBackground: true, Now: clk.Now}) // no ConfigFor, as the broker
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Close()
			f2, _ := m2.Log(followerTP)
			if got := readRecords(t, f2); f2.LogEndOffset() != leo || len(got) != len(want) {
				t.Fatalf("after the restart the follower's log went from LEO %d (%d records) to LEO %d (%d records)",
					leo, len(want), f2.LogEndOffset(), len(got))
			}
		})
	}
}

// After an unclean restart the recovery point is the checkpointed one,
// below segments that rolled after it was written, and on a log written no
// more no roll flushes them again. The cleaner flushes the sealed segments
// below its bound itself and cleans them: waiting for the recovery point,
// it left that replica's superseded values and tombstones for good.
func TestCleanAfterAnUncleanRestartFlushesTheSealedSegments(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	leo := writeKeys(t, l, clk, 40, "a", "b")
	flush(t, l)
	if len(l.segments()) < 3 {
		t.Fatalf("setup: %d segments, want several sealed", len(l.segments()))
	}
	l.Abandon()
	l = openLogOpts(t, Options{FS: mem, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: 0})
	if l.RecoveryPoint() != 0 || l.LogEndOffset() != leo {
		t.Fatalf("setup: reopened with recovery point %d, LEO %d", l.RecoveryPoint(), l.LogEndOffset())
	}
	c, err := l.Cleanable(leo)
	if err != nil {
		t.Fatal(err)
	}
	if c.DirtyBytes == 0 || !c.NeedsCleaning(cfg) {
		t.Fatalf("after an unclean restart the sealed segments are not cleanable: %+v", c)
	}
	if rp, active := l.RecoveryPoint(), l.active().base; rp < active {
		t.Fatalf("recovery point %d below the active segment's base %d", rp, active)
	}
	res, err := l.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20})
	if err != nil || res.RecordsRemoved == 0 {
		t.Fatalf("clean after an unclean restart: %+v, %v", res, err)
	}
	got := readRecords(t, l)
	last := map[string]stored{}
	for _, r := range got {
		last[r.key] = r
	}
	for _, k := range []string{"a", "b"} {
		if want := fmt.Sprintf("%s-39-", k); !strings.HasPrefix(last[k].value, want) {
			t.Fatalf("key %s ends with %q after cleaning, want its latest value %s...", k, last[k].value, want)
		}
	}
}

// A compacted log's active segment rolls at max.compaction.lag.ms when
// that is sooner than segment.ms (Kafka's
// LogConfig.maxSegmentMs): the cleaner never touches the active segment.
// A deleting log keeps segment.ms.
func TestMaxCompactionLagBoundsTheActiveSegmentsAge(t *testing.T) {
	for _, policy := range []string{"compact", "compact,delete", "delete"} {
		clk := newClock()
		cfg := compactConfig()
		cfg.CleanupPolicy = policy
		cfg.SegmentMs = time.Hour
		cfg.MaxCompactionLag = time.Minute
		l := openLog(t, newMem(t), cfg, clk)
		writeKeys(t, l, clk, 1, "a")
		clk.Advance(time.Minute)
		writeKeys(t, l, clk, 1, "a")
		want := 2
		if policy == "delete" {
			want = 1
		}
		if n := l.Stats().Segments; n != want {
			t.Fatalf("%s: %d segments after a write past max.compaction.lag.ms, want %d", policy, n, want)
		}
	}
}

// TestCleanDropsRecordsWrittenWithoutKey: records without a key, written
// while the topic was not compacted, are dropped by the first cleaning
// after cleanup.policy turns to compact, as Kafka's cleaner drops them;
// keyed records keep their latest value and the records above the
// cleanable end stay.
func TestCleanDropsRecordsWrittenWithoutKey(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, smallConfig(), clk)
	for i := range 30 {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: clk.Now().UnixMilli(), Value: val(fmt.Sprintf("keyless-%d-%s", i, strings.Repeat("z", 40)))})
		b.Append(recordbatch.Record{Timestamp: clk.Now().UnixMilli(), Key: []byte("k"), Value: val(fmt.Sprintf("k-%d", i))})
		if _, err := l.AppendAsLeader(bytes.Clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetConfig(compactConfig()); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	res := mustClean(t, l, leo)
	keyless, active := 0, l.active().base
	for _, r := range readRecords(t, l) {
		if r.key == "" && r.offset < active {
			keyless++
		}
	}
	if keyless != 0 || res.RecordsRemoved == 0 {
		t.Fatalf("%d records without a key left below the active segment (%d removed in all)", keyless, res.RecordsRemoved)
	}
	if got := state(readRecords(t, l)); got["k"] != "k-29" {
		t.Fatalf("key k reads %q after cleaning, want its latest value k-29", got["k"])
	}
}

// appendKeyed appends one batch of recs at the clock's time and returns the
// LEO.
func appendKeyed(t testing.TB, l *Log, clk *clock, recs ...kv) int64 {
	t.Helper()
	info, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), recs...), 0)
	if err != nil {
		t.Fatal(err)
	}
	return info.LogEndOffset
}

// tombstoneAt reports whether the log still holds a tombstone for key at off.
func tombstoneAt(t testing.TB, l *Log, key string, off int64) bool {
	t.Helper()
	for _, r := range readRecords(t, l) {
		if r.offset == off {
			return r.tomb && r.key == key
		}
	}
	return false
}

// When the key map fills inside a segment, the records after the map's end
// stay as they are, tombstones included, and the segment counts as cleaned.
// The next pass is the first to deduplicate such a tombstone: however late
// it comes, the tombstone stays delete.retention.ms from then (Kafka never
// drops a tombstone in its first deduplicating pass). Before, a pass coming
// delete.retention.ms after the first dropped it at once, and a follower
// that had the key's older value but not yet the tombstone kept that value
// for good.
func TestCleanKeepsATombstoneThroughThePassThatFirstDeduplicatesIt(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	appendKeyed(t, l, clk, kv{"gone", val("old")})
	for i := range 4 {
		appendKeyed(t, l, clk, kv{fmt.Sprint("u", i), val("v")})
	}
	tomb := appendKeyed(t, l, clk, kv{"gone", nil}) - 1
	clk.Advance(cfg.SegmentMs)
	leo := appendKeyed(t, l, clk, kv{"x", val("v")}) // rolls: all of the above is sealed
	flush(t, l)
	// Four keys fit: the map ends at u3, inside the segment, before the tombstone.
	res, err := l.Clean(CleanOptions{UpperBound: leo, MapBytes: 4 * offsetMapEntrySize})
	if err != nil || res.MapEnd != tomb-1 {
		t.Fatalf("first pass: %+v, %v; want the map to end at %d", res, err, tomb-1)
	}
	clk.Advance(2 * cfg.DeleteRetention) // the next pass comes late
	if res := mustClean(t, l, leo); res.RecordsRemoved == 0 || !tombstoneAt(t, l, "gone", tomb) {
		t.Fatalf("the pass that first deduplicated the tombstone removed it: %+v", res)
	}
	clk.Advance(time.Minute)
	if res := mustClean(t, l, leo); !tombstoneAt(t, l, "gone", tomb) {
		t.Fatalf("tombstone removed a minute after its first deduplicating pass: %+v", res)
	}
	clk.Advance(cfg.DeleteRetention)
	if res := mustClean(t, l, leo); res.TombstonesRemoved != 1 || tombstoneAt(t, l, "gone", tomb) {
		t.Fatalf("tombstone kept past delete.retention.ms: %+v", res)
	}
}

// A pass that merges a segment cleaned long ago with one cleaned recently
// gives the merged segment the later cleaning time, and a crash after the
// swap must not lose it: the checkpoint still naming the merged segment's
// base with its old time would let the next pass, minutes later, drop the
// tombstones of the recent part. The time is checkpointed before the swap
// is committed.
func TestCleanCrashAfterAMergingSwapKeepsTheMergedTombstones(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	big := kvBatch(clk.Now().UnixMilli(), kv{"k1", val(strings.Repeat("v", 1000))})
	pad := kvBatch(clk.Now().UnixMilli(), kv{"pad", val("v")})
	cfg.SegmentBytes = int64(len(big) + len(pad)) // the first segment is full
	l, err := Open(Options{FS: mem, Dir: testDir, Config: cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendKeyed(t, l, clk, kv{"k1", val(strings.Repeat("v", 1000))})
	appendKeyed(t, l, clk, kv{"pad", val("v")})
	leo := appendKeyed(t, l, clk, kv{"x", val("v")}) // rolls by size
	mustClean(t, l, leo)                             // T0: the first segment is cleaned

	clk.Advance(2 * cfg.DeleteRetention)
	tomb := appendKeyed(t, l, clk, kv{"k1", nil}) - 1
	filler := strings.Repeat("y", int(cfg.SegmentBytes)-100)
	leo = appendKeyed(t, l, clk, kv{"y", val(filler)}) // rolls by size: the tombstone is sealed
	// T1: the first segment loses k1's value but is too large to merge with
	// the tombstone's segment, which is cleaned for the first time.
	if res := mustClean(t, l, leo); res.SegmentsAfter != 2 || !tombstoneAt(t, l, "k1", tomb) {
		t.Fatalf("second pass: %+v", res)
	}

	clk.Advance(time.Minute)
	leo = appendKeyed(t, l, clk, kv{"z", val("v")}) // rolls by size: y is dirty and sealed
	flush(t, l)
	var crashed *vfs.MemFS
	swapped := func(CleanResult) {
		if crashed == nil {
			crashed = mem.CrashClone(1) // the power goes right after the first swap
		}
	}
	res, err := l.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20, Swapped: swapped})
	if err != nil || crashed == nil || res.SegmentsBefore < 2 || len(l.segments()) != 3 {
		t.Fatalf("third pass did not merge the two cleaned segments: %+v, %v, %d segments", res, err, len(l.segments()))
	}
	rp := l.RecoveryPoint()
	l.Abandon()

	r, err := Open(Options{FS: crashed, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: rp})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	clk.Advance(time.Minute)
	if res := mustClean(t, r, leo); !tombstoneAt(t, r, "k1", tomb) {
		t.Fatalf("tombstone removed minutes after its first cleaning, by the pass after a crash: %+v", res)
	}
	if _, ok := state(readRecords(t, r))["k1"]; ok {
		t.Fatal("key k1 is back")
	}
}

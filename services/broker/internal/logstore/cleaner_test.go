package logstore

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// TestManagerCleansIdleCompactedLog: a compacted log that gets no more
// traffic is still cleaned, and nothing but its sealed segments changes;
// a delete-policy log and one whose dirty ratio is below the minimum are
// left alone.
func TestManagerCleansIdleCompactedLog(t *testing.T) {
	fsys, clk := newMem(t), newClock()
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get, NoBackground: true, Now: clk.Now,
		CleanerDedupeBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	compacted, _ := m.GetOrCreate(tpA, compactConfig())
	plainLog, _ := m.GetOrCreate(tpB, smallConfig())
	leo := writeKeys(t, compacted, clk, 40, "a", "b", "c")
	plainLEO := fill(t, plainLog, 30, 3, 40)
	hw.set(tpA, leo)
	hw.set(tpB, plainLEO)
	before := readRecords(t, compacted)
	plainBefore := logShape(plainLog)

	clk.Advance(time.Hour) // no traffic for a while
	flush(t, compacted)
	if !m.RunCleaner() {
		t.Fatal("the idle compacted log was not cleaned")
	}
	after := readRecords(t, compacted)
	if !maps.Equal(state(before), state(after)) || len(after) >= len(before) {
		t.Fatalf("cleaning: %d records before, %d after, state equal %v", len(before), len(after), maps.Equal(state(before), state(after)))
	}
	if compacted.LogEndOffset() != leo || compacted.LogStartOffset() != 0 {
		t.Fatalf("LEO %d (want %d), log start %d", compacted.LogEndOffset(), leo, compacted.LogStartOffset())
	}
	if ps := logShape(plainLog); ps != plainBefore {
		t.Fatalf("the delete-policy log changed: %+v -> %+v", plainBefore, ps)
	}
	st := m.CleanerStats()
	if st.Passes != 1 || st.BytesRead == 0 || st.BytesWritten == 0 || st.RecordsRemoved == 0 || st.MaxDirtyRatio != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Nothing dirty is left: the next run does nothing.
	stats := logShape(compacted)
	if m.RunCleaner() {
		t.Fatal("a clean log was cleaned again")
	}
	if logShape(compacted) != stats || m.CleanerStats().Passes != 1 || m.CleanerStats().MaxDirtyRatio != 0 {
		t.Fatalf("second run changed things: %+v, %+v", compacted.Stats(), m.CleanerStats())
	}
	// Above the HW nothing is cleaned.
	leo2 := writeKeys(t, compacted, clk, 40, "a", "b", "c")
	flush(t, compacted)
	if m.RunCleaner() {
		t.Fatalf("cleaned above the HW %d (LEO %d)", leo, leo2)
	}
}

func TestManagerCleanerInBackground(t *testing.T) {
	fsys, clk := newMem(t), newClock()
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get, Now: clk.Now,
		CleanerEnable: true, CleanerBackoff: 5 * time.Millisecond, CleanerDedupeBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.GetOrCreate(tpA, compactConfig())
	leo := writeKeys(t, l, clk, 40, "a", "b")
	hw.set(tpA, leo)
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().CleanedSegments == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background cleaner did not clean the log")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// renameHookFS runs a hook before each rename whose source ends with suffix.
type renameHookFS struct {
	vfs.FS
	suffix string
	hook   func()
}

func (f *renameHookFS) Rename(oldname, newname string) error {
	if strings.HasSuffix(oldname, f.suffix) && f.hook != nil {
		h := f.hook
		f.hook = nil
		h()
	}
	return f.FS.Rename(oldname, newname)
}

// A truncation that lands between a pass's commit and its swap wins: the
// swap is dropped, the committed files deleted, and the log is exactly the
// truncated one, now and after a reopen.
func TestCleanAbortedByTruncation(t *testing.T) {
	mem, clk := newMem(t), newClock()
	hfs := &renameHookFS{FS: mem, suffix: timeIndexSuffix + cleanedSuffix}
	l := openLogOpts(t, Options{FS: hfs, Dir: testDir, Config: compactConfig(), Now: clk.Now})
	leo := writeKeys(t, l, clk, 40, "a", "b", "c")
	truncateTo := l.segments()[0].next // the first group's segment goes
	var want []stored
	hfs.hook = func() {
		if _, err := l.TruncateTo(truncateTo); err != nil {
			t.Errorf("TruncateTo: %v", err)
		}
		want = readRecords(t, l)
	}
	flush(t, l)
	_, err := l.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20})
	if !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean after a truncation under it: %v", err)
	}
	if got := readRecords(t, l); !slicesEqual(got, want) || l.LogEndOffset() != truncateTo {
		t.Fatalf("log after the aborted pass: %d records (want %d), LEO %d (want %d)", len(got), len(want), l.LogEndOffset(), truncateTo)
	}
	ents, _ := mem.ReadDir(testDir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			t.Fatalf("%s left behind", e.Name())
		}
	}
	l.Abandon()
	r := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: compactConfig(), Now: clk.Now})
	if got := readRecords(t, r); !slicesEqual(got, want) || r.Stats().CompletedSwaps != 0 {
		t.Fatalf("reopened: %d records (want %d), completed swaps %d", len(got), len(want), r.Stats().CompletedSwaps)
	}
}

// Appends, reads and cleaning passes run together (run with -race): readers
// always get valid batches at or after what they asked for, and the final
// log holds the latest value of every key.
func TestCleanConcurrentWithAppendsAndReads(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	latest := map[string]string{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(2)
	go func() { // reader
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-done:
				return
			default:
			}
			leo := l.LogEndOffset()
			if leo == 0 {
				continue
			}
			off := i % leo
			res, err := l.Read(off, 500, leo)
			if err != nil {
				t.Errorf("Read(%d): %v", off, err)
				return
			}
			for b, err := range recordbatch.All(res.Records) {
				if err == nil {
					err = b.ValidateStored()
				}
				if err != nil || b.NextOffset() <= off {
					t.Errorf("Read(%d): batch [%d, %d]: %v", off, b.BaseOffset(), b.LastOffset(), err)
					return
				}
			}
		}
	}()
	go func() { // cleaner
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := l.Clean(CleanOptions{UpperBound: l.LogEndOffset(), MapBytes: 1 << 20}); err != nil && !errors.Is(err, ErrCleanAborted) {
				t.Errorf("Clean: %v", err)
				return
			}
		}
	}()
	for i := range 400 {
		k := fmt.Sprint("k", i%7)
		v := fmt.Sprint(i, strings.Repeat("w", 50))
		if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{k, val(v)}), 0); err != nil {
			t.Fatal(err)
		}
		latest[k] = v
	}
	close(done)
	wg.Wait()
	mustClean(t, l, l.LogEndOffset())
	if got := state(readRecords(t, l)); !maps.Equal(got, latest) {
		t.Fatalf("final state %v, want %v", got, latest)
	}
}

// After a truncation the data from the truncation point is dirty again: a
// key rewritten there supersedes its older values at the next pass, and a
// tombstone appended to the cut segment waits its full delete.retention.ms.
func TestTruncationMakesDataDirtyAgain(t *testing.T) {
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	l := openLog(t, mem, cfg, clk)
	leo := writeKeys(t, l, clk, 40, "a", "b")
	mustClean(t, l, leo)
	c, _ := l.Cleanable(leo)
	cut := c.FirstDirty - 10
	if _, err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if c, _ := l.Cleanable(l.LogEndOffset()); c.FirstDirty > l.LogEndOffset() {
		t.Fatalf("first dirty offset %d beyond the truncated log end %d", c.FirstDirty, l.LogEndOffset())
	}
	if _, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), kv{"a", nil}), 0); err != nil {
		t.Fatal(err)
	}
	leo = writeKeys(t, l, clk, 40, "b")
	clk.Advance(cfg.DeleteRetention + time.Second)
	mustClean(t, l, leo)
	recs := readRecords(t, l)
	if _, ok := state(recs)["a"]; ok {
		t.Fatal("key a survived its tombstone")
	}
	n := 0
	for _, r := range recs {
		if r.tomb {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d tombstones after the first cleaning of their segment, want 1", n)
	}
}

// A pass told to stop (the broker shutting down) ends at its next read and
// changes nothing.
func TestCleanStops(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	leo := writeKeys(t, l, clk, 40, "a", "b")
	before, stats := readRecords(t, l), logShape(l)
	stop := make(chan struct{})
	close(stop)
	flush(t, l)
	if _, err := l.Clean(CleanOptions{UpperBound: leo, MapBytes: 1 << 20, Stop: stop}); !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("stopped pass: %v", err)
	}
	if got := readRecords(t, l); !slicesEqual(got, before) || logShape(l) != stats {
		t.Fatalf("a stopped pass changed the log: %d records (was %d), stats %+v", len(got), len(before), l.Stats())
	}
}

// logShape is what cleaning could change in a log's stats (flushes of
// rolled segments run in the background and move the recovery point
// whenever they like).
func logShape(l *Log) [5]int64 {
	st := l.Stats()
	return [5]int64{int64(st.Segments), st.SizeBytes, st.LogStartOffset, st.LogEndOffset, st.CleanedSegments}
}

// A truncation below the HW that lands after the cleaner read the HW, and
// records appended in its place, are not cleaned over: the pass is
// abandoned and the log is left as the truncation made it.
func TestManagerCleanerSeesTruncationAfterHWRead(t *testing.T) {
	fsys, clk := newMem(t), newClock()
	var l *Log
	var oldHW int64
	var want []stored
	truncated := false
	hwAfterTruncating := func(tp TopicPartition) (int64, bool) {
		if tp != tpA || l == nil {
			return 0, false
		}
		if !truncated {
			// The HW is read, then the log is truncated below it and
			// gets new, uncommitted values for the same keys.
			truncated = true
			if _, err := l.TruncateTo(l.segments()[1].base); err != nil {
				t.Errorf("TruncateTo: %v", err)
			}
			writeKeys(t, l, clk, 20, "a", "b", "c")
			if err := l.Flush(); err != nil {
				t.Error(err)
			}
			want = readRecords(t, l)
		}
		return oldHW, true
	}
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hwAfterTruncating, NoBackground: true, Now: clk.Now,
		CleanerDedupeBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ = m.GetOrCreate(tpA, compactConfig())
	oldHW = writeKeys(t, l, clk, 40, "a", "b", "c")
	flush(t, l)
	m.RunCleaner()
	if !truncated {
		t.Fatal("the HW was never read")
	}
	if got := readRecords(t, l); !slicesEqual(got, want) {
		t.Fatalf("the pass cleaned over records truncated and replaced after its HW read: %d records, want %d", len(got), len(want))
	}
	if st := m.CleanerStats(); st.Aborted != 1 || st.Passes != 0 {
		t.Fatalf("stats %+v, want one aborted pass", st)
	}
}

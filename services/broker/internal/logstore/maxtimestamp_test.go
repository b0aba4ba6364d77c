package logstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"tidemark.io/services/recordbatch"
)

// batchAt builds a batch whose records carry the given timestamps, in order.
func batchAt(tss ...int64) []byte {
	var b recordbatch.Builder
	for i, ts := range tss {
		b.Append(recordbatch.Record{Timestamp: ts, Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{'v'}, 40)})
	}
	return bytes.Clone(b.Build(-1, -1, -1))
}

// wantMaxTimestamp reads every record of l's segments and returns the
// first one carrying the largest timestamp: the answer by brute force.
func wantMaxTimestamp(t *testing.T, l *Log) (TimestampOffset, bool) {
	t.Helper()
	segs := l.segments()
	if len(segs) == 0 || l.LogEndOffset() == segs[0].base {
		return TimestampOffset{}, false
	}
	best, found := TimestampOffset{Timestamp: -1}, false
	// Batch by batch, gaps (a compacted log's) allowed.
	for next := segs[0].base; next < l.LogEndOffset(); {
		res, err := l.Read(next, 1<<20, l.LogEndOffset())
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("Read(%d): %d bytes, %v", next, len(res.Records), err)
		}
		for b, err := range recordbatch.All(res.Records) {
			if err != nil {
				t.Fatalf("Read(%d): %v", next, err)
			}
			for r, err := range b.Records() {
				if err != nil {
					t.Fatal(err)
				}
				if r.Timestamp > best.Timestamp {
					best, found = TimestampOffset{r.Offset, r.Timestamp, b.PartitionLeaderEpoch()}, true
				}
			}
		}
		next = res.NextOffset
	}
	return best, found
}

func checkMaxTimestamp(t *testing.T, l *Log, what string) TimestampOffset {
	t.Helper()
	want, wantFound := wantMaxTimestamp(t, l)
	got, found, err := l.MaxTimestampOffset()
	if err != nil {
		t.Fatalf("%s: MaxTimestampOffset: %v", what, err)
	}
	if found != wantFound || got != want {
		t.Fatalf("%s: MaxTimestampOffset = %+v found %v; want %+v found %v", what, got, found, want, wantFound)
	}
	return got
}

// Timestamps out of order within and across batches and segments, with
// ties: the answer is the first record carrying the largest timestamp.
func TestMaxTimestampOffsetOutOfOrder(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	if _, found, err := l.MaxTimestampOffset(); err != nil || found {
		t.Fatalf("empty log: found %v, err %v", found, err)
	}
	base := newClock().Now().UnixMilli() - 100_000
	appendOne := func(epoch int32, tss ...int64) {
		t.Helper()
		if _, err := l.AppendAsLeader(batchAt(tss...), epoch); err != nil {
			t.Fatal(err)
		}
	}
	appendOne(0, base+5, base+50, base+7)  // max inside the batch, not last
	appendOne(0, base+1, base+50, base+50) // ties: not later than offset 1
	appendOne(1, base+2)                   // smaller
	checkMaxTimestamp(t, l, "within a batch")
	if got := checkMaxTimestamp(t, l, "ties"); got.Offset != 1 || got.LeaderEpoch != 0 {
		t.Fatalf("ties: got %+v, want offset 1 epoch 0", got)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 60 {
		tss := make([]int64, 1+rng.IntN(4))
		for j := range tss {
			tss[j] = base + rng.Int64N(400)
		}
		appendOne(int32(1+i/20), tss...)
		checkMaxTimestamp(t, l, fmt.Sprintf("after batch %d", i))
	}
	if len(l.segments()) < 3 {
		t.Fatalf("want several segments, have %d", len(l.segments()))
	}
	// A later segment that only ties the maximum does not win.
	top := checkMaxTimestamp(t, l, "before a tie in a new segment")
	for n := len(l.segments()); len(l.segments()) == n; {
		appendOne(9, base)
	}
	appendOne(9, base, top.Timestamp)
	if got := checkMaxTimestamp(t, l, "tie in a new segment"); got != top {
		t.Fatalf("a tie in a later segment moved the answer: %+v, was %+v", got, top)
	}
	// A larger one does.
	appendOne(9, top.Timestamp+1, base)
	if got := checkMaxTimestamp(t, l, "new maximum"); got.Offset != l.LogEndOffset()-2 || got.LeaderEpoch != 9 {
		t.Fatalf("new maximum: %+v", got)
	}
}

// Truncating away the batch that holds the maximum (the active segment's or
// a sealed one's) recomputes it from what is left.
func TestMaxTimestampOffsetAfterTruncation(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	base := newClock().Now().UnixMilli() - 100_000
	for i := range 40 {
		if _, err := l.AppendAsLeader(batchAt(base+int64(i%7), base+int64(i*3%11)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendAsLeader(batchAt(base+1, base+1000, base+2), 0); err != nil {
		t.Fatal(err)
	}
	peak := checkMaxTimestamp(t, l, "before truncation")
	if peak.Timestamp != base+1000 {
		t.Fatalf("peak %+v", peak)
	}
	for i := range 10 {
		if _, err := l.AppendAsLeader(batchAt(base+int64(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.TruncateTo(peak.Offset); err != nil {
		t.Fatal(err)
	}
	if got := checkMaxTimestamp(t, l, "after truncating the peak's batch"); got.Timestamp >= base+1000 {
		t.Fatalf("the truncated batch's timestamp is still the maximum: %+v", got)
	}
	// Into a sealed segment: the later segments go and the cut one's
	// maximum is recomputed.
	mid := l.segments()[1].base + 1
	if _, err := l.TruncateTo(mid); err != nil {
		t.Fatal(err)
	}
	checkMaxTimestamp(t, l, "after truncating into a sealed segment")
	if _, err := l.AppendAsLeader(batchAt(base+3, base+3), 0); err != nil {
		t.Fatal(err)
	}
	checkMaxTimestamp(t, l, "appending after truncation")
}

// A restart, clean or after a crash, rebuilds each segment's maximum from
// its files; retention that deletes the segment holding the maximum moves it
// to the largest of the segments left.
func TestMaxTimestampOffsetAcrossRestartAndRetention(t *testing.T) {
	mem := newMem(t)
	cfg := smallConfig()
	clk := newClock()
	base := clk.Now().UnixMilli() - 100_000
	l, err := Open(Options{FS: mem, Dir: testDir, Config: cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 9))
	for i := range 50 {
		tss := []int64{base + rng.Int64N(300), base + rng.Int64N(300)}
		if i == 3 {
			tss[1] = base + 5000 // in the first segment
		}
		if _, err := l.AppendAsLeader(batchAt(tss...), int32(i/10)); err != nil {
			t.Fatal(err)
		}
	}
	want := checkMaxTimestamp(t, l, "before close")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(Options{FS: mem, Dir: testDir, Config: cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := checkMaxTimestamp(t, l, "after a clean restart"); got != want {
		t.Fatalf("clean restart: %+v, was %+v", got, want)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(1)
	l.Close()
	// Nothing checkpointed: every segment is recovered from its batches.
	r, err := Open(Options{FS: crashed, Dir: testDir, Config: cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := checkMaxTimestamp(t, r, "after a crash"); got != want {
		t.Fatalf("crash recovery: %+v, was %+v", got, want)
	}
	if r.segments()[0].base > want.Offset || r.segments()[1].base <= want.Offset {
		t.Fatalf("the maximum %+v is not in the first segment", want)
	}
	if err := r.AdvanceLogStartOffset(r.segments()[1].base, r.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteOldSegments(r.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if got := checkMaxTimestamp(t, r, "after retention"); got.Timestamp >= want.Timestamp {
		t.Fatalf("the deleted segment's maximum is still answered: %+v", got)
	}
}

// The cleaner removing the record that held the maximum (its key written
// again later, with a smaller timestamp) moves the maximum to what it kept.
func TestMaxTimestampOffsetAfterCompaction(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	now := clk.Now().UnixMilli()
	if _, err := l.AppendAsLeader(kvBatch(now+50_000, kv{"peak", val("old")}), 0); err != nil {
		t.Fatal(err)
	}
	leo := writeKeys(t, l, clk, 30, "peak", "a", "b")
	before := checkMaxTimestamp(t, l, "before cleaning")
	if before.Offset != 0 || before.Timestamp != now+50_000 {
		t.Fatalf("before cleaning: %+v, want offset 0", before)
	}
	mustClean(t, l, leo)
	if got := checkMaxTimestamp(t, l, "after cleaning"); got.Timestamp >= now+50_000 {
		t.Fatalf("the cleaned record's timestamp is still the maximum: %+v", got)
	}
}

// Lookups beside appends and rolls only ever answer a record that was
// appended, and after the appends the brute-force answer (run with -race).
func TestMaxTimestampOffsetBesideAppends(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	base := newClock().Now().UnixMilli() - 100_000
	done := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(5, 5))
		for range 200 {
			if _, err := l.AppendAsLeader(batchAt(base+rng.Int64N(1000), base+rng.Int64N(1000)), 0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		to, found, err := l.MaxTimestampOffset()
		if err != nil {
			t.Fatal(err)
		}
		if found && (to.Offset >= l.LogEndOffset() || to.Timestamp < base || to.Timestamp >= base+1000) {
			t.Fatalf("answered %+v with the LEO at %d", to, l.LogEndOffset())
		}
	}
	checkMaxTimestamp(t, l, "after the appends")
}

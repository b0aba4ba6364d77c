package logstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
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
// again later, with a smaller timestamp) moves the maximum to what it kept:
// as Kafka's cleaner, a partly kept batch's header maximum becomes its kept
// records' largest, and the segments' maxima and time indexes follow it.
func TestMaxTimestampOffsetAfterCompaction(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	now := clk.Now().UnixMilli()
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: now - 10, Key: []byte("lone"), Value: val("kept")})
	b.Append(recordbatch.Record{Timestamp: now + 50_000, Key: []byte("peak"), Value: val("old")})
	if _, err := l.AppendAsLeader(bytes.Clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)), 0); err != nil {
		t.Fatal(err)
	}
	leo := writeKeys(t, l, clk, 30, "peak", "a", "b")
	before := checkMaxTimestamp(t, l, "before cleaning")
	if before.Offset != 1 || before.Timestamp != now+50_000 {
		t.Fatalf("before cleaning: %+v, want offset 1", before)
	}
	mustClean(t, l, leo)
	if got := checkMaxTimestamp(t, l, "after cleaning"); got.Timestamp >= now+50_000 {
		t.Fatalf("the cleaned record's timestamp is still the maximum: %+v", got)
	}
	res, err := l.Read(0, 1<<20, leo)
	if err != nil {
		t.Fatal(err)
	}
	var first recordbatch.Batch
	for b, err := range recordbatch.All(res.Records) {
		if err != nil {
			t.Fatal(err)
		}
		first = b
		break
	}
	if first.BaseOffset() != 0 || first.RecordCount() != 1 || first.MaxTimestamp() != now-10 {
		t.Fatalf("cleaned first batch: base %d, %d records, max timestamp %d; want 0, 1, %d",
			first.BaseOffset(), first.RecordCount(), first.MaxTimestamp(), now-10)
	}
	for _, s := range l.segments() {
		if ts := s.maxTS.Load(); ts >= now+50_000 {
			t.Fatalf("segment %d keeps the cleaned record's timestamp %d as its maximum", s.base, ts)
		}
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

// Batches claiming a maximum no record of theirs carries: one a cleaner
// emptied (kept for its producer's sequence) and one cleaned by an older
// tidemark, whose header kept the removed record's maximum. The lookup
// misses them in the segment and walks the log for the largest timestamp a
// record carries.
func TestMaxTimestampOffsetPastHeadersNoRecordCarries(t *testing.T) {
	l := openLog(t, newMem(t), compactConfig(), newClock())
	now := newClock().Now().UnixMilli()
	build := func(base int64, recs ...recordbatch.Record) recordbatch.Batch {
		var b recordbatch.Builder
		for _, r := range recs {
			b.Append(r)
		}
		out := bytes.Clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
		recordbatch.Batch(out).SetBaseOffset(base)
		recordbatch.Batch(out).SetPartitionLeaderEpoch(0)
		return out
	}
	rec := func(ts int64, key string) recordbatch.Record {
		return recordbatch.Record{Timestamp: ts, Key: []byte(key), Value: val("v")}
	}
	// Offsets 0-2, the middle one cleaned away, the header's maximum kept
	// (as an older tidemark's cleaner left it).
	stale, _, err := build(0, rec(now-10, "a"), rec(now+50_000, "peak"), rec(now-5, "b")).
		Retain(nil, false, func(r recordbatch.Record) bool { return r.Offset != 1 })
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(stale[35:], uint64(now+50_000))
	binary.BigEndian.PutUint32(stale[17:], crc32.Checksum(stale[21:], crc32.MakeTable(crc32.Castagnoli)))
	// Offset 3, emptied: its header keeps its maximum, as Kafka's.
	empty, _, err := build(3, rec(now+60_000, "gone")).Retain(nil, true, func(recordbatch.Record) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{stale, empty, build(4, rec(now-1, "c"), rec(now-2, "d"))} {
		if err := recordbatch.ValidateStored(b); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	got, found, err := l.MaxTimestampOffset()
	if err != nil || !found || got.Offset != 4 || got.Timestamp != now-1 {
		t.Fatalf("MaxTimestampOffset = %+v found %v, %v; want offset 4 at %d", got, found, err, now-1)
	}
}

// logAppendTime marks b a LogAppendTime batch stamped at ts.
func logAppendTime(b []byte, ts int64) []byte {
	b[22] |= 0x08 // attributes: the timestamp type bit
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// Every record of a LogAppendTime batch carries its append time, but a
// cleaned one may have lost its first records, or all of them: as Kafka's
// lookups, the answer is the first record the batch still holds, and an
// emptied batch answers nothing.
func TestTimestampLookupsInCleanedLogAppendTimeBatches(t *testing.T) {
	l := openLog(t, newMem(t), compactConfig(), newClock())
	now := newClock().Now().UnixMilli()
	build := func(base, ts int64, keys ...string) recordbatch.Batch {
		var b recordbatch.Builder
		for _, k := range keys {
			b.Append(recordbatch.Record{Timestamp: now, Key: []byte(k), Value: val("v")})
		}
		out := bytes.Clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
		recordbatch.Batch(out).SetBaseOffset(base)
		recordbatch.Batch(out).SetPartitionLeaderEpoch(0)
		return logAppendTime(out, ts)
	}
	// Offsets 0-2 stamped now+100, the first two cleaned away.
	thinned, _, err := build(0, now+100, "a", "b", "c").Retain(nil, false, func(r recordbatch.Record) bool { return r.Offset == 2 })
	if err != nil {
		t.Fatal(err)
	}
	// Offset 3 stamped now+200, emptied; offset 4 stamped now+150.
	emptied, _, err := build(3, now+200, "d").Retain(nil, true, func(recordbatch.Record) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{thinned, emptied, build(4, now+150, "e")} {
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	if to, found, err := l.MaxTimestampOffset(); err != nil || !found || to.Offset != 4 || to.Timestamp != now+150 {
		t.Fatalf("MaxTimestampOffset = %+v found %v, %v; want offset 4 at %d", to, found, err, now+150)
	}
	for _, c := range []struct {
		ts, offset int64
	}{{now, 2}, {now + 100, 2}, {now + 101, 4}, {now + 200, -1}} {
		to, found, err := l.OffsetForTimestamp(c.ts, l.LogEndOffset())
		if err != nil || (found != (c.offset >= 0)) || (found && to.Offset != c.offset) {
			t.Fatalf("OffsetForTimestamp(now+%d) = %+v found %v, %v; want offset %d", c.ts-now, to, found, err, c.offset)
		}
	}
	// The thinned batch alone holds the maximum: its first kept record.
	l2 := openLog(t, newMem(t), compactConfig(), newClock())
	if _, err := l2.AppendAsFollower(thinned); err != nil {
		t.Fatal(err)
	}
	if to, found, err := l2.MaxTimestampOffset(); err != nil || !found || to.Offset != 2 || to.Timestamp != now+100 {
		t.Fatalf("MaxTimestampOffset of the thinned batch = %+v found %v, %v; want offset 2", to, found, err)
	}
}

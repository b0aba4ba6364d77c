package logstore

import (
	"bytes"
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func TestAppendAssignsOffsetsAndEpoch(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	raw := plain(3, 10, 5000).build()
	info, err := l.AppendAsLeader(raw, 4)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 2 || info.LogEndOffset != 3 || info.RecordCount != 3 || info.MaxTimestamp != 5002 {
		t.Fatalf("info %+v", info)
	}
	info = appendLeader(t, l, plain(2, 10, 6000), 4)
	if info.FirstOffset != 3 || info.LastOffset != 4 || l.LogEndOffset() != 5 {
		t.Fatalf("second info %+v, LEO %d", info, l.LogEndOffset())
	}
	got := readAll(t, l, 0, 5, 1<<20)
	if len(got) != 2 || got[1].BaseOffset() != 3 || got[0].PartitionLeaderEpoch() != 4 {
		t.Fatalf("read back %d batches", len(got))
	}
	// The stored bytes are the caller's bytes, patched in place, not re-encoded.
	if !bytes.Equal(got[0], raw) {
		t.Fatal("stored batch differs from the patched input")
	}
	if e := l.EpochEntries(); len(e) != 1 || e[0] != (EpochEntry{4, 0}) {
		t.Fatalf("epoch entries %v", e)
	}
}

func TestReadEveryOffsetAcrossSegments(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	leo := fill(t, l, 40, 3, 40) // ~200-byte batches, ~10 per segment
	if n := l.Stats().Segments; n < 4 {
		t.Fatalf("only %d segments; the test needs several", n)
	}
	for off := int64(0); off < leo; off++ {
		res, err := l.Read(off, 1, leo)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b := recordbatch.Batch(res.Records)
		if b.BaseOffset() > off || b.LastOffset() < off || res.NextOffset != b.NextOffset() {
			t.Fatalf("Read(%d) gave batch [%d, %d], next %d", off, b.BaseOffset(), b.LastOffset(), res.NextOffset)
		}
	}
	all := readAll(t, l, 0, leo, 1<<20)
	if all[len(all)-1].NextOffset() != leo {
		t.Fatal("did not read to the LEO")
	}
}

func TestReadStopsAtSegmentBoundary(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	leo := fill(t, l, 30, 3, 40)
	segs := l.segments()
	for i, s := range segs[:len(segs)-1] {
		next := segs[i+1].base
		res, err := l.Read(s.base, 1<<20, leo)
		if err != nil {
			t.Fatal(err)
		}
		if res.NextOffset != next || int64(len(res.Records)) != s.size.Load() {
			t.Fatalf("segment %d: read ended at %d with %d bytes, want %d and %d", s.base, res.NextOffset, len(res.Records), next, s.size.Load())
		}
		// The last offset of a segment and the first of the next.
		if res, _ := l.Read(next-1, 1, leo); recordbatch.Batch(res.Records).NextOffset() != next {
			t.Fatalf("read at %d crossed into the next segment", next-1)
		}
		if res, _ := l.Read(next, 1, leo); recordbatch.Batch(res.Records).BaseOffset() != next {
			t.Fatalf("read at %d did not start the next segment", next)
		}
	}
}

func TestReadBoundsAndRanges(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	for range 4 {
		appendLeader(t, l, plain(5, 10, 1), 0) // batches [0-4] [5-9] [10-14] [15-19]
	}
	cases := []struct {
		name           string
		off            int64
		maxBytes       int
		bound          int64
		wantFirst      int64
		wantNext       int64
		wantEmpty      bool
		wantOutOfRange bool
	}{
		{"at LEO is empty", 20, 1 << 20, 20, 0, 20, true, false},
		{"beyond LEO", 21, 1 << 20, 30, 0, 0, false, true},
		{"negative", -1, 1 << 20, 30, 0, 0, false, true},
		{"at the bound is empty", 10, 1 << 20, 10, 0, 10, true, false},
		{"bound mid-batch excludes that batch", 5, 1 << 20, 12, 5, 10, false, false},
		{"batch containing offset crosses the bound", 11, 1 << 20, 12, 0, 11, true, false},
		{"bound above LEO is the LEO", 0, 1 << 20, 99, 0, 20, false, false},
		{"mid-batch start", 7, 1 << 20, 20, 5, 20, false, false},
		{"maxBytes 1 still returns the first batch", 0, 1, 20, 0, 5, false, false},
		{"maxBytes zero", 0, 0, 20, 0, 5, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := l.Read(c.off, c.maxBytes, c.bound)
			if c.wantOutOfRange {
				wantCode(t, err, kerr.OffsetOutOfRange)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.wantEmpty != (len(res.Records) == 0) || res.NextOffset != c.wantNext {
				t.Fatalf("got %d bytes, next %d; want empty=%v next %d", len(res.Records), res.NextOffset, c.wantEmpty, c.wantNext)
			}
			if !c.wantEmpty && recordbatch.Batch(res.Records).BaseOffset() != c.wantFirst {
				t.Fatalf("first batch at %d, want %d", recordbatch.Batch(res.Records).BaseOffset(), c.wantFirst)
			}
		})
	}
}

func TestReadMaxBytesWholeBatches(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	var sizes []int
	for range 4 {
		b := plain(2, 20, 1).build()
		sizes = append(sizes, len(b))
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	two := sizes[0] + sizes[1]
	for _, maxBytes := range []int{two, two + 1, two + sizes[2] - 1} {
		res, err := l.Read(0, maxBytes, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != two || res.NextOffset != 4 {
			t.Fatalf("maxBytes %d: %d bytes next %d, want %d bytes next 4", maxBytes, len(res.Records), res.NextOffset, two)
		}
	}
}

func TestReadOversizedFirstBatchKIP74(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := openLog(t, newMem(t), cfg, newClock())
	appendLeader(t, l, plain(1, 10, 1), 0)
	big := appendLeader(t, l, plain(4, 50_000, 1), 0) // ~200 KB batch
	appendLeader(t, l, plain(1, 10, 1), 0)
	res, err := l.Read(big.FirstOffset, 1024, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	b := recordbatch.Batch(res.Records)
	if len(b) < 200_000 || b.Validate() != nil || b.BaseOffset() != big.FirstOffset || res.NextOffset != big.LastOffset+1 {
		t.Fatalf("oversized batch not returned whole: %d bytes, next %d", len(b), res.NextOffset)
	}
	// Behind a small batch it is left for the next read.
	res, _ = l.Read(0, 1024, l.LogEndOffset())
	if res.NextOffset != big.FirstOffset {
		t.Fatalf("read from 0 ended at %d, want %d", res.NextOffset, big.FirstOffset)
	}
}

func TestReadBelowLogStart(t *testing.T) {
	clk := newClock()
	l := openLog(t, newMem(t), smallConfig(), clk)
	leo := fill(t, l, 30, 3, 40)
	if err := l.AdvanceLogStartOffset(25, leo); err != nil {
		t.Fatal(err)
	}
	_, err := l.Read(24, 100, leo)
	wantCode(t, err, kerr.OffsetOutOfRange)
	if _, err := l.Read(25, 100, leo); err != nil {
		t.Fatal(err)
	}
}

func TestRollBySizeAndTime(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.SegmentMs = time.Minute
	l := openLog(t, newMem(t), cfg, clk)
	appendLeader(t, l, plain(1, 500, 1), 0)
	appendLeader(t, l, plain(1, 500, 1), 0)
	appendLeader(t, l, plain(1, 500, 1), 0)
	if n := l.Stats().Segments; n != 1 {
		t.Fatalf("%d segments after 1.7 KB, want 1", n)
	}
	appendLeader(t, l, plain(1, 500, 1), 0) // would pass 2048
	segs := l.segments()
	if len(segs) != 2 || segs[1].base != 3 {
		t.Fatalf("size roll: %d segments, last base %d", len(segs), segs[len(segs)-1].base)
	}
	for _, s := range segs {
		if s.size.Load() > cfg.SegmentBytes {
			t.Fatalf("segment %d is %d bytes", s.base, s.size.Load())
		}
	}
	clk.Advance(59 * time.Second)
	appendLeader(t, l, plain(1, 10, 1), 0)
	if n := l.Stats().Segments; n != 2 {
		t.Fatalf("rolled before segment.ms")
	}
	clk.Advance(2 * time.Second)
	appendLeader(t, l, plain(1, 10, 1), 0)
	segs = l.segments()
	if len(segs) != 3 || segs[2].base != 5 {
		t.Fatalf("time roll: %d segments", len(segs))
	}
	if l.Stats().Rolls != 2 {
		t.Fatalf("Rolls = %d", l.Stats().Rolls)
	}
}

func TestOversizedBatchGetsItsOwnSegment(t *testing.T) {
	cfg := smallConfig()
	l := openLog(t, newMem(t), cfg, newClock())
	appendLeader(t, l, plain(1, 10, 1), 0)
	_, err := l.AppendAsLeader(plain(1, 5000, 1).build(), 0)
	wantCode(t, err, kerr.RecordListTooLarge)
	// A follower takes it: the leader already accepted it.
	big := plain(1, 5000, 1).build()
	recordbatch.Batch(big).SetBaseOffset(1)
	recordbatch.Batch(big).SetPartitionLeaderEpoch(0)
	if _, err := l.AppendAsFollower(big); err != nil {
		t.Fatal(err)
	}
	if segs := l.segments(); len(segs) != 2 || segs[1].size.Load() != int64(len(big)) {
		t.Fatalf("oversized batch not alone in a new segment")
	}
	readAll(t, l, 0, l.LogEndOffset(), 100)
}

func TestMaxMessageBytes(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxMessageBytes = 300
	l := openLog(t, newMem(t), cfg, newClock())
	_, err := l.AppendAsLeader(plain(1, 400, 1).build(), 0)
	wantCode(t, err, kerr.MessageTooLarge)
	if l.LogEndOffset() != 0 {
		t.Fatal("rejected batch changed the LEO")
	}
	appendLeader(t, l, plain(1, 100, 1), 0)
}

func TestAppendRejectsBadInput(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	good := plain(2, 10, 1).build()
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	cases := []struct {
		name string
		data []byte
		code kerr.Code
	}{
		{"crc", flipped, kerr.CorruptMessage},
		{"torn", good[:len(good)-3], kerr.CorruptMessage},
		{"trailing bytes", append(bytes.Clone(good), 1, 2, 3), kerr.CorruptMessage},
		{"empty", nil, kerr.InvalidRecord},
	}
	for _, c := range cases {
		_, err := l.AppendAsLeader(c.data, 0)
		if kerr.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
		}
	}
	_, err := l.AppendAsLeader(good, -1)
	wantCode(t, err, kerr.InvalidRequest)
	if l.LogEndOffset() != 0 {
		t.Fatal("a rejected append moved the LEO")
	}
	appendLeader(t, l, plain(1, 1, 1), 5)
	_, err = l.AppendAsLeader(good, 4)
	wantCode(t, err, kerr.FencedLeaderEpoch)
}

func TestMultiBatchAppend(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	set := append(plain(2, 10, 1).build(), plain(3, 10, 1).build()...)
	info, err := l.AppendAsLeader(set, 1)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 4 || info.RecordCount != 5 {
		t.Fatalf("info %+v", info)
	}
	if got := readAll(t, l, 0, 5, 1<<20); len(got) != 2 || got[1].BaseOffset() != 2 {
		t.Fatal("multi-batch append read back wrong")
	}
}

func TestFollowerAppend(t *testing.T) {
	leader := openLogOpts(t, Options{FS: newMem(t), Dir: "/data/l-0", Config: smallConfig()})
	follower := openLogOpts(t, Options{FS: newMem(t), Dir: "/data/f-0", Config: smallConfig()})
	for i := range 6 {
		appendLeader(t, leader, plain(2, 30, 1), int32(i/2*3)) // epochs 0,0,3,3,6,6
	}
	res, err := leader.Read(0, 1<<20, leader.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	half := 0
	for b := range recordbatch.All(res.Records) {
		if b.BaseOffset() == 6 {
			break
		}
		half += len(b)
	}
	// A gap is what a compacted leader log sends: accepted, and recorded so
	// that recovery does not take it for damage.
	gapped := openLogOpts(t, Options{FS: newMem(t), Dir: "/data/g-0", Config: smallConfig()})
	if _, err := gapped.AppendAsFollower(bytes.Clone(res.Records[half:])); err != nil {
		t.Fatalf("gap refused: %v", err)
	}
	if gapped.LogEndOffset() != leader.LogEndOffset() || !gapped.gapsAllowed.Load() {
		t.Fatalf("gapped follower LEO %d, gaps allowed %v", gapped.LogEndOffset(), gapped.gapsAllowed.Load())
	}
	if _, err := follower.AppendAsFollower(bytes.Clone(res.Records[:half])); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(bytes.Clone(res.Records[:half])); !errorsIs(err, ErrNonContiguous) {
		t.Fatalf("overlap error %v", err)
	}
	if _, err := follower.AppendAsFollower(bytes.Clone(res.Records[half:])); err != nil {
		t.Fatal(err)
	}
	if follower.LogEndOffset() != leader.LogEndOffset() {
		t.Fatalf("follower LEO %d, leader %d", follower.LogEndOffset(), leader.LogEndOffset())
	}
	got, _ := follower.Read(0, 1<<20, follower.LogEndOffset())
	if !bytes.Equal(got.Records, res.Records) {
		t.Fatal("follower log differs from the leader's")
	}
	want := []EpochEntry{{0, 0}, {3, 4}, {6, 8}}
	if e := follower.EpochEntries(); !equalEntries(e, want) {
		t.Fatalf("follower epochs %v, want %v", e, want)
	}
}

func TestAssignEpochStartOffsetBeforeAppend(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	appendLeader(t, l, plain(3, 10, 1), 1)
	if err := l.AssignEpochStartOffset(2); err != nil {
		t.Fatal(err)
	}
	// KAFKA-7415: the new epoch is known at LEO 3 before any append in it.
	if e, off := l.EndOffsetForEpoch(1); e != 1 || off != 3 {
		t.Fatalf("EndOffsetForEpoch(1) = %d, %d", e, off)
	}
	if e, off := l.EndOffsetForEpoch(2); e != 2 || off != 3 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d", e, off)
	}
	appendLeader(t, l, plain(2, 10, 1), 2)
	if e, off := l.EndOffsetForEpoch(2); e != 2 || off != 5 {
		t.Fatalf("EndOffsetForEpoch(2) after append = %d, %d", e, off)
	}
	if s, ok := l.LatestEpochStartOffset(); !ok || s != 3 || l.LatestEpoch() != 2 {
		t.Fatalf("latest epoch %d start %d", l.LatestEpoch(), s)
	}
}

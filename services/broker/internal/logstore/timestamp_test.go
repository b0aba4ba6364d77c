package logstore

import (
	"testing"

	"tidemark.io/services/recordbatch"
)

func TestOffsetForTimestamp(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	// Per batch: 3 records with timestamps ts, ts+1, ts+2; batch first
	// timestamps wander (not monotonic), as producer clocks do.
	firsts := []int64{100, 90, 200, 150, 400, 390, 395, 800, 700, 1000, 1001, 1500, 1200, 2000, 2100, 2050, 3000, 2999, 4000, 5000}
	for _, ts := range firsts {
		appendLeader(t, l, plain(3, 60, ts), 0)
	}
	leo := l.LogEndOffset()
	if len(l.segments()) < 3 {
		t.Fatal("want several segments")
	}
	// Brute force over all records gives the expected answer.
	type rec struct{ off, ts int64 }
	var all []rec
	for _, b := range readAll(t, l, 0, leo, 1<<20) {
		for r := range b.Records() {
			all = append(all, rec{r.Offset, r.Timestamp})
		}
	}
	expect := func(ts, bound int64) (int64, int64, bool) {
		for _, r := range all {
			if r.off >= bound {
				break
			}
			if r.ts >= ts {
				// Only whole batches below bound count.
				b := r.off / 3
				if (b+1)*3 > bound {
					return 0, 0, false
				}
				return r.off, r.ts, true
			}
		}
		return 0, 0, false
	}
	for _, ts := range []int64{0, 90, 91, 101, 102, 103, 150, 199, 201, 399, 400, 702, 999, 1001, 1199, 2052, 2999, 3002, 4001, 5002, 5003, 99999} {
		for _, bound := range []int64{leo, leo - 3, 30} {
			wo, wt, wf := expect(ts, bound)
			to, f, err := l.OffsetForTimestamp(ts, bound)
			o, gt := to.Offset, to.Timestamp
			if err != nil {
				t.Fatal(err)
			}
			if f != wf || (f && (o != wo || gt != wt)) {
				t.Fatalf("OffsetForTimestamp(%d, bound %d) = %d@%d %v; want %d@%d %v", ts, bound, o, gt, f, wo, wt, wf)
			}
		}
	}
}

func TestOffsetForTimestampRespectsLogStart(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	for i := range 10 {
		appendLeader(t, l, plain(3, 60, int64(100*i)), 0)
	}
	if err := l.AdvanceLogStartOffset(7, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	to, f, err := l.OffsetForTimestamp(0, l.LogEndOffset())
	if err != nil || !f || to.Offset != 7 || to.Timestamp != 201 {
		t.Fatalf("got %+v %v %v, want 7@201", to, f, err)
	}
}

func TestOffsetForTimestampLogAppendTime(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	appendLeader(t, l, plain(2, 10, 10), 0)
	var bl recordbatch.Builder
	bl.Append(recordbatch.Record{Timestamp: 5, Value: []byte("x")})
	bl.Append(recordbatch.Record{Timestamp: 6, Value: []byte("y")})
	b := bl.Build(-1, -1, -1)
	b[22] |= 0x08 // LogAppendTime
	putMaxTimestamp(b, 500)
	// A leader stamps LogAppendTime batches; a producer may not send one.
	b.SetBaseOffset(2)
	b.SetPartitionLeaderEpoch(0)
	if _, err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	to, f, _ := l.OffsetForTimestamp(100, l.LogEndOffset())
	if !f || to.Offset != 2 || to.Timestamp != 500 {
		t.Fatalf("got %+v %v, want 2@500", to, f)
	}
}

// A record found by timestamp answers the leader epoch of its batch, and
// an offset the epoch it was written in (ListOffsets, as Kafka).
func TestOffsetForTimestampAnswersTheBatchEpoch(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	appendLeader(t, l, plain(2, 10, 100), 0)
	appendLeader(t, l, plain(2, 10, 200), 3)
	for _, tc := range []struct {
		ts    int64
		off   int64
		epoch int32
	}{{0, 0, 0}, {101, 1, 0}, {150, 2, 3}, {201, 3, 3}} {
		to, found, err := l.OffsetForTimestamp(tc.ts, l.LogEndOffset())
		if err != nil || !found || to.Offset != tc.off || to.LeaderEpoch != tc.epoch {
			t.Fatalf("OffsetForTimestamp(%d) = %+v %v %v, want offset %d in epoch %d", tc.ts, to, found, err, tc.off, tc.epoch)
		}
	}
	for off, want := range map[int64]int32{0: 0, 1: 0, 2: 3, 3: 3} {
		if got := l.EpochForOffset(off); got != want {
			t.Fatalf("EpochForOffset(%d) = %d, want %d", off, got, want)
		}
	}
}

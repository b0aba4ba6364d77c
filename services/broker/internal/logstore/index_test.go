package logstore

import (
	"testing"

	"tidemark.io/services/recordbatch"
)

type batchPos struct {
	pos        int64
	base, last int64
}

func batchesOf(t *testing.T, s *segment) []batchPos {
	t.Helper()
	var out []batchPos
	err := walkHeaders(s, 0, s.size.Load(), func(h recordbatch.Batch, p, _ int64) bool {
		out = append(out, batchPos{p, h.BaseOffset(), h.LastOffset()})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestIndexLookupEdges(t *testing.T) {
	for _, interval := range []int64{0, 200, 4096} {
		cfg := smallConfig()
		cfg.SegmentBytes = 8192
		cfg.IndexIntervalBytes = interval
		l := openLog(t, newMem(t), cfg, newClock())
		fill(t, l, 30, 3, 40) // ~180-byte batches
		s := l.segments()[0]
		bs := batchesOf(t, s)
		starts := map[int64]bool{}
		for _, b := range bs {
			starts[b.pos] = true
		}
		maxBatch := int64(0)
		for i := 1; i < len(bs); i++ {
			maxBatch = max(maxBatch, bs[i].pos-bs[i-1].pos)
		}
		check := func(stage string) map[int64]int64 {
			got := map[int64]int64{}
			for _, b := range bs {
				for _, off := range []int64{b.base, b.last, (b.base + b.last) / 2} {
					p, err := s.lookup(off)
					if err != nil {
						t.Fatal(err)
					}
					got[off] = p
					switch {
					case !starts[p]:
						t.Fatalf("%s interval %d: lookup(%d) = %d, not a batch start", stage, interval, off, p)
					case p > b.pos:
						t.Fatalf("%s interval %d: lookup(%d) = %d is past the batch at %d", stage, interval, off, p, b.pos)
					case b.pos-p > interval+maxBatch:
						t.Fatalf("%s interval %d: lookup(%d) = %d is %d bytes short of %d", stage, interval, off, p, b.pos-p, b.pos)
					case interval == 0 && p != b.pos:
						t.Fatalf("%s interval 0: lookup(%d) = %d, want exactly %d", stage, off, p, b.pos)
					}
					pos, h, found, err := findBatch(s, off, s.size.Load())
					if err != nil || !found || pos != b.pos || h.BaseOffset() != b.base {
						t.Fatalf("%s: findBatch(%d) = %d (%v, %v), want %d", stage, off, pos, found, err, b.pos)
					}
				}
			}
			if p, _ := s.lookup(s.base - 1); p != 0 {
				t.Fatalf("%s: lookup below the base = %d", stage, p)
			}
			if _, _, found, _ := findBatch(s, bs[len(bs)-1].last+1, s.size.Load()); found {
				t.Fatalf("%s: findBatch past the end found a batch", stage)
			}
			return got
		}
		active := check("active")
		if err := l.rollLocked(l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		if s.index.mem != nil {
			t.Fatal("sealed index still in memory")
		}
		sealed := check("sealed")
		for off, p := range active {
			if sealed[off] != p {
				t.Fatalf("interval %d: lookup(%d) active %d, sealed %d", interval, off, p, sealed[off])
			}
		}
		if interval == 0 && s.index.count != len(bs)-1 {
			t.Fatalf("interval 0: %d entries for %d batches", s.index.count, len(bs))
		}
	}
}

func TestTimeIndexEntriesAreMonotonic(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	// Timestamps go up and down; the time index only records new maxima.
	for _, ts := range []int64{100, 50, 300, 200, 400, 400, 350, 900, 10, 1000} {
		appendLeader(t, l, plain(2, 100, ts), 0)
	}
	for _, s := range l.segments() {
		var lastTS int64 = -1
		var lastRel uint32
		for i := range s.timeIndex.count {
			e, err := s.timeIndex.entryLocked(i, make([]byte, timeEntrySize))
			if err != nil {
				t.Fatal(err)
			}
			ts, rel := decodeTimeEntry(e)
			if ts <= lastTS || (i > 0 && rel < lastRel) {
				t.Fatalf("time index entry %d (%d, %d) after (%d, %d)", i, ts, rel, lastTS, lastRel)
			}
			lastTS, lastRel = ts, rel
		}
	}
}

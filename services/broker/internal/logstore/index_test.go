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
		if err := l.rollLocked(l.LogEndOffset(), false); err != nil {
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

// An active index keeps only a bounded window of its newest entries in
// memory; every lookup (in the window, below it, at the edges) answers as
// a fully in-memory index would, before and after a truncation into the
// part only the file holds, and after the segment is reopened.
func TestActiveIndexMemoryIsBounded(t *testing.T) {
	mem := newMem(t)
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 0 // an entry per batch
	l := openLog(t, mem, cfg, newClock())
	s := l.segments()[0]
	const window = 16
	s.index.memEntries, s.timeIndex.memEntries = window, window
	fill(t, l, 200, 1, 20)
	bs := batchesOf(t, s)
	if n := s.index.count; n != len(bs)-1 {
		t.Fatalf("%d entries for %d batches", n, len(bs))
	}
	if got := len(s.index.mem) / offsetEntrySize; got > 2*window {
		t.Fatalf("the active offset index holds %d entries in memory, want at most %d", got, 2*window)
	}
	if s.index.memFrom == 0 {
		t.Fatal("the window never moved: the test needs entries below it")
	}
	check := func(stage string, upTo int64) {
		t.Helper()
		for _, b := range bs {
			if b.base >= upTo {
				break
			}
			p, err := s.lookup(b.base)
			if err != nil || p != b.pos {
				t.Fatalf("%s: lookup(%d) = %d, %v; want %d", stage, b.base, p, err, b.pos)
			}
		}
	}
	check("active", l.LogEndOffset())

	// Truncate to below the window: the entries left come from the file.
	cut := bs[s.index.memFrom/2].base
	if _, err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	bs = batchesOf(t, s)
	check("after truncating below the window", cut)
	fill(t, l, 50, 1, 20) // the window fills and moves again
	bs = batchesOf(t, s)
	check("after appending again", l.LogEndOffset())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: cfg, CleanShutdown: true})
	s = r.segments()[0]
	check("reopened", r.LogEndOffset())
	if got := len(s.index.mem) / offsetEntrySize; got > activeIndexMemEntries {
		t.Fatalf("the reopened active index holds %d entries in memory", got)
	}
}

package logstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"

	"testing"
	"tidemark.io/services/recordbatch"
	"time"
)

// TestCleanCrashSimulation mixes keyed appends (some tombstones), flushes,
// truncations above the cleaned range (as a follower's, which never go
// below its HW outside an unclean election), cleaning passes with small and
// large key maps, and clock jumps past delete.retention.ms; then "loses
// power" and reopens. The reopened log must hold only records written at
// their offsets, and replay to exactly the state of every record written
// below its new end.
func TestCleanCrashSimulation(t *testing.T) {
	deadline := time.Now().Add(6 * time.Second)
	runs, swaps := 0, int64(0)
	for seed := uint64(1); seed <= 200 && time.Now().Before(deadline); seed++ {
		swaps += cleanCrashRun(t, seed)
		runs++
	}
	t.Logf("%d runs, %d segments cleaned", runs, swaps)
	if runs < 20 || swaps == 0 {
		t.Fatalf("too little: %d runs, %d segments cleaned", runs, swaps)
	}
}

type appended struct {
	key   string
	value string
	tomb  bool
}

func cleanCrashRun(t *testing.T, seed uint64) int64 {
	rng := rand.New(rand.NewPCG(seed, 11))
	mem, clk := newMem(t), newClock()
	cfg := compactConfig()
	cfg.SegmentBytes = int64(1024 + rng.IntN(2000))
	cfg.IndexIntervalBytes = int64(rng.IntN(400))
	// The recovery point checkpoint, as a Manager keeps it: written before
	// each cleaner swap and after each truncation.
	var l *Log
	persisted := int64(0)
	persist := func() { persisted = l.RecoveryPoint() }
	files := NewFileCache(int(seed % 4)) // tiny caches: see crashRun
	l, err := Open(Options{FS: mem, Files: files, Dir: testDir, Config: cfg, Now: clk.Now,
		RecoveryPointLowered: func() error { persist(); return nil }, PersistRecoveryPoints: func() error { persist(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	boundaries := []int64{0} // batch ends: where a HW may be and a truncation goes
	history := map[int64]appended{}
	cleanedUpTo := int64(0) // truncations stay above every upper bound given to Clean
	for range 30 + rng.IntN(150) {
		switch r := rng.IntN(100); {
		case r < 65:
			var recs []kv
			for range 1 + rng.IntN(4) {
				k := fmt.Sprint("k", rng.IntN(12))
				if rng.IntN(8) == 0 {
					recs = append(recs, kv{k, nil})
				} else {
					recs = append(recs, kv{k, val(fmt.Sprint(k, "=", rng.Uint32(), "-", string(make([]byte, rng.IntN(60)))))})
				}
			}
			info, err := l.AppendAsLeader(kvBatch(clk.Now().UnixMilli(), recs...), 0)
			if err != nil {
				t.Fatalf("seed %d: append: %v", seed, err)
			}
			for i, r := range recs {
				history[info.FirstOffset+int64(i)] = appended{key: r.key, value: string(r.value), tomb: r.value == nil}
			}
			boundaries = append(boundaries, info.LogEndOffset)
		case r < 75:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		case r < 88:
			hw := boundaries[max(len(boundaries)-1-rng.IntN(4), 0)]
			mapBytes := int64(1 << 20)
			if rng.IntN(2) == 0 {
				mapBytes = int64(16+rng.IntN(40)) * offsetMapEntrySize
			}
			if _, err := l.Clean(CleanOptions{UpperBound: hw, MapBytes: mapBytes}); err != nil && !isMapTooSmall(err) {
				t.Fatalf("seed %d: clean: %v", seed, err)
			}
			cleanedUpTo = max(cleanedUpTo, min(hw, l.RecoveryPoint()))
		case r < 93:
			var above []int64
			for _, b := range boundaries {
				if b >= cleanedUpTo && b >= l.LogStartOffset() && b < l.LogEndOffset() {
					above = append(above, b)
				}
			}
			if len(above) == 0 {
				continue
			}
			newLEO, err := l.TruncateTo(above[rng.IntN(len(above))])
			if err != nil {
				t.Fatalf("seed %d: truncate: %v", seed, err)
			}
			for off := range history {
				if off >= newLEO {
					delete(history, off)
				}
			}
			for len(boundaries) > 0 && boundaries[len(boundaries)-1] > newLEO {
				boundaries = boundaries[:len(boundaries)-1]
			}
		default:
			clk.Advance(time.Duration(rng.IntN(3)) * cfg.DeleteRetention)
		}
	}
	cleaned := l.Stats().CleanedSegments
	// Read before the crash image: a background flush finishing after it
	// would claim data the image does not hold. The checkpoint may also
	// have been written later than the last swap, by the periodic task.
	l.mu.Lock()
	lo, hi := min(persisted, l.RecoveryPoint()), max(persisted, l.RecoveryPoint())
	l.mu.Unlock()
	rp := lo + rng.Int64N(hi-lo+1)
	crashed := mem.CrashClone(seed)
	l.Abandon()
	r, err := Open(Options{FS: crashed, Files: files, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: rp})
	if err != nil {
		t.Fatalf("seed %d: reopen: %v", seed, err)
	}
	defer r.Close()
	leo := r.LogEndOffset()
	if leo < cleanedUpTo {
		t.Fatalf("seed %d: LEO %d after the crash is below the cleaned range %d", seed, leo, cleanedUpTo)
	}
	if testing.Verbose() {
		for _, sg := range r.segments() {
			var hs []string
			walkHeaders(sg, 0, sg.size.Load(), func(h recordbatch.Batch, _, _ int64) bool {
				hs = append(hs, fmt.Sprintf("[%d,%d]n%d", h.BaseOffset(), h.LastOffset(), h.RecordCount()))
				return true
			})
			t.Logf("seed %d: segment %d next %d: %v", seed, sg.base, sg.next, hs)
		}
	}
	got := readRecords(t, r)
	for _, rec := range got {
		w, ok := history[rec.offset]
		if !ok || w.key != rec.key || w.value != rec.value || w.tomb != rec.tomb {
			t.Fatalf("seed %d: record at %d is %+v, written %+v (%v)", seed, rec.offset, rec, w, ok)
		}
	}
	want := map[string]string{}
	for off := int64(0); off < leo; off++ {
		if w, ok := history[off]; ok {
			if w.tomb {
				delete(want, w.key)
			} else {
				want[w.key] = w.value
			}
		}
	}
	if st := state(got); !maps.Equal(st, want) {
		t.Fatalf("seed %d: state after the crash\n%v\nwant\n%v", seed, st, want)
	}
	return cleaned
}

func isMapTooSmall(err error) bool {
	return err != nil && strings.Contains(err.Error(), "too few for one batch")
}

package logstore

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestEndOffsetFor(t *testing.T) {
	entries := []EpochEntry{{1, 0}, {3, 10}, {4, 10}, {7, 25}}
	const leo = 40
	cases := []struct {
		epoch      int32
		wantEpoch  int32
		wantOffset int64
	}{
		{-1, UndefinedEpoch, UndefinedEpochOffset}, // undefined request
		{0, 0, 0},  // below the first epoch: (epoch, first start), as Kafka
		{1, 1, 10}, // start of the next epoch
		{2, 1, 10}, // unknown epoch: largest below it
		{3, 3, 10}, // an epoch with no data ends where it began
		{4, 4, 25},
		{5, 4, 25},
		{6, 4, 25},
		{7, 7, leo}, // the latest epoch ends at the LEO
		{8, UndefinedEpoch, UndefinedEpochOffset}, // above the latest
	}
	c := NewLeaderEpochCache(entries, nil, nil)
	for _, tc := range cases {
		e, off := c.EndOffsetFor(tc.epoch, leo)
		if e != tc.wantEpoch || off != tc.wantOffset {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.epoch, e, off, tc.wantEpoch, tc.wantOffset)
		}
	}
	empty := NewLeaderEpochCache(nil, nil, nil)
	if e, off := empty.EndOffsetFor(0, leo); e != UndefinedEpoch || off != UndefinedEpochOffset {
		t.Errorf("empty cache: (%d, %d)", e, off)
	}
}

// EpochFor answers ListOffsets' epoch for an offset, as Kafka's
// epochForOffset: the epoch whose range holds it.
func TestEpochFor(t *testing.T) {
	c := NewLeaderEpochCache([]EpochEntry{{1, 5}, {3, 10}, {4, 10}, {7, 25}}, nil, nil)
	for _, tc := range []struct {
		offset int64
		want   int32
	}{
		{0, UndefinedEpoch}, // below the first entry (the log start moved past it meanwhile)
		{5, 1}, {9, 1},
		{10, 4}, // epoch 3 holds no record: 4 starts where it did
		{24, 4}, {25, 7}, {1000, 7},
	} {
		if got := c.EpochFor(tc.offset); got != tc.want {
			t.Errorf("EpochFor(%d) = %d, want %d", tc.offset, got, tc.want)
		}
	}
	if got := NewLeaderEpochCache(nil, nil, nil).EpochFor(0); got != UndefinedEpoch {
		t.Errorf("empty cache: %d", got)
	}
}

func TestAssign(t *testing.T) {
	cases := []struct {
		name    string
		epoch   int32
		offset  int64
		changed bool
		want    []EpochEntry
	}{
		{"first", 2, 5, true, []EpochEntry{{2, 5}}},
		{"same epoch again", 2, 9, false, []EpochEntry{{2, 5}}},
		{"older epoch ignored", 1, 20, false, []EpochEntry{{2, 5}}},
		{"newer epoch later", 3, 8, true, []EpochEntry{{2, 5}, {3, 8}}},
		// Kafka's assign: epoch 3 was empty, epoch 4 replaces it.
		{"newer epoch at the same offset replaces an empty one", 4, 8, true, []EpochEntry{{2, 5}, {4, 8}}},
		{"newer epoch, lower offset replaces what starts after it", 5, 6, true, []EpochEntry{{2, 5}, {5, 6}}},
		{"newer epoch later again", 6, 12, true, []EpochEntry{{2, 5}, {5, 6}, {6, 12}}},
		{"older epoch ignored after several", 4, 20, false, []EpochEntry{{2, 5}, {5, 6}, {6, 12}}},
	}
	var persisted []EpochEntry
	c := NewLeaderEpochCache(nil, func(e []EpochEntry) error { persisted = e; return nil }, nil)
	for _, tc := range cases {
		changed, err := c.Assign(tc.epoch, tc.offset)
		if err != nil || changed != tc.changed || !equalEntries(c.Entries(), tc.want) {
			t.Fatalf("%s: changed %v err %v entries %v; want %v %v", tc.name, changed, err, c.Entries(), tc.changed, tc.want)
		}
		if !equalEntries(persisted, tc.want) {
			t.Fatalf("%s: persisted %v", tc.name, persisted)
		}
	}
	if _, err := c.Assign(-1, 0); err == nil {
		t.Fatal("negative epoch accepted")
	}
}

func TestTruncateFromEndAndStart(t *testing.T) {
	base := []EpochEntry{{1, 0}, {2, 10}, {4, 20}, {5, 30}}
	ends := []struct {
		offset int64
		want   []EpochEntry
	}{
		{31, base},
		{30, base[:3]},
		{25, base[:3]},
		{20, base[:2]},
		{1, base[:1]},
		{0, nil},
	}
	for _, tc := range ends {
		c := NewLeaderEpochCache(base, nil, nil)
		if err := c.TruncateFromEnd(tc.offset); err != nil || !equalEntries(c.Entries(), tc.want) {
			t.Errorf("TruncateFromEnd(%d) = %v, want %v", tc.offset, c.Entries(), tc.want)
		}
	}
	starts := []struct {
		offset int64
		want   []EpochEntry
	}{
		{0, base},
		{5, []EpochEntry{{1, 5}, {2, 10}, {4, 20}, {5, 30}}},
		{10, []EpochEntry{{2, 10}, {4, 20}, {5, 30}}},
		{25, []EpochEntry{{4, 25}, {5, 30}}},
		{99, []EpochEntry{{5, 99}}},
	}
	for _, tc := range starts {
		c := NewLeaderEpochCache(base, nil, nil)
		if err := c.TruncateFromStart(tc.offset); err != nil || !equalEntries(c.Entries(), tc.want) {
			t.Errorf("TruncateFromStart(%d) = %v, want %v", tc.offset, c.Entries(), tc.want)
		}
	}
}

func TestEpochCacheUnchangedWhenPersistFails(t *testing.T) {
	fail := errors.New("disk full")
	c := NewLeaderEpochCache([]EpochEntry{{1, 0}, {2, 10}}, func([]EpochEntry) error { return fail }, nil)
	if _, err := c.Assign(3, 20); !errors.Is(err, fail) {
		t.Fatalf("Assign: %v", err)
	}
	if err := c.TruncateFromEnd(5); !errors.Is(err, fail) {
		t.Fatalf("TruncateFromEnd: %v", err)
	}
	if err := c.Clear(); !errors.Is(err, fail) {
		t.Fatalf("Clear: %v", err)
	}
	if !equalEntries(c.Entries(), []EpochEntry{{1, 0}, {2, 10}}) || c.LatestEpoch() != 2 {
		t.Fatalf("entries changed: %v", c.Entries())
	}
}

func TestEpochCachePersistedOnEveryChange(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, smallConfig(), newClock())
	appendLeader(t, l, plain(2, 1, 1), 1)
	l.AssignEpochStartOffset(3)
	appendLeader(t, l, plain(2, 1, 1), 3)
	l.AssignEpochStartOffset(5)
	appendLeader(t, l, plain(2, 1, 1), 5)
	l.TruncateTo(4)
	got, found, err := readEpochCheckpoint(fsys, testDir)
	if err != nil || !found || !equalEntries(got, l.EpochEntries()) || !equalEntries(got, []EpochEntry{{1, 0}, {3, 2}}) {
		t.Fatalf("checkpoint %v (%v %v), cache %v", got, found, err, l.EpochEntries())
	}
}

// TestEndOffsetForBelowTrimmedCache is retention on an idle topic: the
// leader's cache was trimmed from the start to an epoch the follower never
// saw. The follower's older epoch ends where the leader's first one begins,
// so its fetch at that offset is in range (Kafka's endOffsetFor), instead of
// being refused for good.
func TestEndOffsetForBelowTrimmedCache(t *testing.T) {
	c := NewLeaderEpochCache([]EpochEntry{{0, 0}, {1, 2}}, nil, nil)
	if err := c.TruncateFromStart(2); err != nil {
		t.Fatal(err)
	}
	if got := c.Entries(); !equalEntries(got, []EpochEntry{{1, 2}}) {
		t.Fatalf("entries after trimming to 2: %v", got)
	}
	if e, off := c.EndOffsetFor(0, 2); e != 0 || off != 2 {
		t.Fatalf("EndOffsetFor(0) = (%d, %d), want (0, 2)", e, off)
	}
}

// kafkaEndOffsetFor is Kafka's endOffsetFor written out naively over an
// ordered entry list, the reference TestEndOffsetForMatchesKafka compares
// the cache with.
func kafkaEndOffsetFor(entries []EpochEntry, epoch int32, leo int64) (int32, int64) {
	if epoch == UndefinedEpoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if n := len(entries); n > 0 && entries[n-1].Epoch == epoch {
		return epoch, leo
	}
	var floor, higher *EpochEntry
	for i := range entries {
		if entries[i].Epoch <= epoch {
			floor = &entries[i]
		} else if higher == nil {
			higher = &entries[i]
		}
	}
	switch {
	case higher == nil:
		return UndefinedEpoch, UndefinedEpochOffset
	case floor == nil:
		return epoch, higher.StartOffset
	}
	return floor.Epoch, higher.StartOffset
}

// TestEndOffsetForMatchesKafka drives the cache through random assignments
// and truncations from both ends and compares every EndOffsetFor answer
// with Kafka's rule.
func TestEndOffsetForMatchesKafka(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for run := range 200 {
		c := NewLeaderEpochCache(nil, nil, nil)
		var leo int64
		for step := range 60 {
			switch op := rng.IntN(10); {
			case op < 5:
				latest := c.LatestEpoch()
				_, _ = c.Assign(latest+1+int32(rng.IntN(3)), leo)
				leo += int64(rng.IntN(4))
			case op < 7:
				leo -= int64(rng.IntN(int(leo) + 1))
				if err := c.TruncateFromEnd(leo); err != nil {
					t.Fatal(err)
				}
			default:
				first := int64(0)
				if e := c.Entries(); len(e) > 0 {
					first = e[0].StartOffset
				}
				if leo > first {
					if err := c.TruncateFromStart(first + int64(rng.IntN(int(leo-first)+1))); err != nil {
						t.Fatal(err)
					}
				}
			}
			entries := c.Entries()
			for e := int32(-1); e <= c.LatestEpoch()+2; e++ {
				gotE, gotOff := c.EndOffsetFor(e, leo)
				wantE, wantOff := kafkaEndOffsetFor(entries, e, leo)
				if gotE != wantE || gotOff != wantOff {
					t.Fatalf("run %d step %d: entries %v leo %d: EndOffsetFor(%d) = (%d, %d), Kafka (%d, %d)",
						run, step, entries, leo, e, gotE, gotOff, wantE, wantOff)
				}
			}
		}
	}
}

// A deferred truncation from the start is visible at once and written by
// Flush; a change persisted meanwhile already wrote it, and Flush never
// writes an older state over a newer one, even when it read its entries
// before that change was made.
func TestEpochCacheDeferredFlushWritesTheNewestState(t *testing.T) {
	var writes [][]EpochEntry
	persist := func(e []EpochEntry) error { writes = append(writes, slices.Clone(e)); return nil }
	c := NewLeaderEpochCache([]EpochEntry{{0, 0}, {1, 10}, {2, 20}}, persist, nil)
	if !c.TruncateFromStartDeferred(15) {
		t.Fatal("truncating from 15 changed nothing")
	}
	if len(writes) != 0 {
		t.Fatalf("the deferred truncation wrote %v", writes)
	}
	if got, want := c.Entries(), []EpochEntry{{1, 15}, {2, 20}}; !equalEntries(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil { // nothing new
		t.Fatal(err)
	}
	if len(writes) != 1 || !equalEntries(writes[0], []EpochEntry{{1, 15}, {2, 20}}) {
		t.Fatalf("writes %v, want one of [{1 15} {2 20}]", writes)
	}

	// A change persisted after the deferred one writes both; the Flush
	// that follows has nothing to write.
	c.TruncateFromStartDeferred(18)
	c.Assign(3, 30)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 2 || !equalEntries(writes[1], []EpochEntry{{1, 18}, {2, 20}, {3, 30}}) {
		t.Fatalf("writes %v, want a second of [{1 18} {2 20} {3 30}]", writes)
	}

	// A Flush that read the entries before a newer change, racing that
	// change's write: whichever writes first, the file ends with the newest.
	for epoch := int32(4); epoch < 40; epoch++ {
		c.TruncateFromStartDeferred(int64(epoch) * 10)
		c.persistMu.Lock() // both writes wait here
		flushed := make(chan error, 1)
		go func() { flushed <- c.Flush() }()
		time.Sleep(time.Millisecond) // Flush has read its entries and waits to write
		assigned := make(chan struct{})
		go func() { c.Assign(epoch, int64(epoch)*10+5); close(assigned) }()
		time.Sleep(time.Millisecond)
		c.persistMu.Unlock()
		<-assigned
		if err := <-flushed; err != nil {
			t.Fatal(err)
		}
		if last := writes[len(writes)-1]; !equalEntries(last, c.Entries()) {
			t.Fatalf("the file ends with %v; the cache holds %v", last, c.Entries())
		}
	}
}

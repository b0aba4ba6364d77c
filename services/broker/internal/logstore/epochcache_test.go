package logstore

import (
	"errors"
	"testing"
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
		{0, UndefinedEpoch, UndefinedEpochOffset},  // below the first epoch
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
		{"newer epoch, lower offset ignored", 3, 4, false, []EpochEntry{{2, 5}}},
		{"newer epoch at the same offset", 3, 5, true, []EpochEntry{{2, 5}, {3, 5}}},
		{"newer epoch later", 6, 12, true, []EpochEntry{{2, 5}, {3, 5}, {6, 12}}},
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

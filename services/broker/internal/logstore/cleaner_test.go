package logstore

import (
	"maps"
	"testing"
	"time"
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
	plainBefore := plainLog.Stats()

	clk.Advance(time.Hour) // no traffic for a while
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
	if ps := plainLog.Stats(); ps != plainBefore {
		t.Fatalf("the delete-policy log changed: %+v -> %+v", plainBefore, ps)
	}
	st := m.CleanerStats()
	if st.Passes != 1 || st.BytesRead == 0 || st.BytesWritten == 0 || st.RecordsRemoved == 0 || st.MaxDirtyRatio != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Nothing dirty is left: the next run does nothing.
	stats := compacted.Stats()
	if m.RunCleaner() {
		t.Fatal("a clean log was cleaned again")
	}
	if compacted.Stats() != stats || m.CleanerStats().Passes != 1 || m.CleanerStats().MaxDirtyRatio != 0 {
		t.Fatalf("second run changed things: %+v, %+v", compacted.Stats(), m.CleanerStats())
	}
	// Above the HW nothing is cleaned.
	leo2 := writeKeys(t, compacted, clk, 40, "a", "b", "c")
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

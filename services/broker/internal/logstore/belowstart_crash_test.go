package logstore

import (
	"errors"
	"fmt"
	"testing"
)

// A segment wholly below the log start that a crash brought back (its
// retirement's rename was not yet durable) may be damaged: DeleteRecords
// right after a roll deletes the sealed segment before the roll's flush
// reached it, and no fsync ever covers it. Loading must not take that for
// damage to the log: nothing in it is readable, so it goes, and the
// segments above it stay. Before, loading cut the log at its first torn
// batch and deleted every later segment, flushed records above the log
// start and all (Kafka's loader recovers a damaged segment below the
// recovery point alone, never the ones after it).
func TestADamagedSegmentBelowTheLogStartCostsNothingAboveIt(t *testing.T) {
	for _, damage := range []string{"torn", "missing tail", "gap after it"} {
		for _, trusted := range []bool{false, true} { // the recovery point below it, or at the end
			t.Run(fmt.Sprintf("%s, trusted %v", damage, trusted), func(t *testing.T) {
				damagedBelowStart(t, damage, trusted)
			})
		}
	}
}

func damagedBelowStart(t *testing.T, damage string, trusted bool) {
	fsys := newMem(t)
	cfg := smallConfig()
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg})
	leo := fill(t, l, 40, 3, 40)
	segs := l.segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments; the test needs 4", len(segs))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Abandon()
	start := segs[2].base + 1 // segments 0 and 1 lie wholly below it
	switch damage {
	case "torn": // the first sector of segment 1 never reached the disk
		f, err := fsys.Open(segs[1].logPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 512), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	case "missing tail": // segment 1 lost its last batches
		f, err := fsys.Open(segs[1].logPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(100); err != nil {
			t.Fatal(err)
		}
		f.Close()
	case "gap after it": // segment 1 was retired, segment 0 came back
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := fsys.Remove(testDir + "/" + offsetName(segs[1].base, suf)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rp := int64(0)
	if trusted {
		rp = leo
	}
	r, err := Open(Options{FS: fsys, Dir: testDir, Config: cfg, LogStartOffset: start, RecoveryPoint: rp})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.LogEndOffset() != leo || r.LogStartOffset() != start {
		t.Fatalf("reopened [%d, %d), want [%d, %d): records above the log start lost",
			r.LogStartOffset(), r.LogEndOffset(), start, leo)
	}
	// The damaged segment goes with the one before it, whatever the
	// recovery point: below the start it is never trusted after a crash.
	if got := r.segments()[0].base; got != segs[2].base {
		t.Fatalf("first segment %d, want %d", got, segs[2].base)
	}
	if n := r.Stats().RecoveredTruncations; n != 0 {
		t.Fatalf("%d recovery truncations: the log above its start was whole", n)
	}
	readAll(t, r, start, leo, 1<<20)
}

// DeleteRecords right after writes that rolled segments, a flush and the
// checkpoints, then a power loss before the deleted segments' renames were
// durable: the reopened log holds every record from the log start to the
// flushed end.
func TestDeleteRecordsRightAfterARollSurvivesAPowerLoss(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		mem := newMem(t)
		hw := &hwTable{m: map[TopicPartition]int64{}}
		m := openManager(t, mem, hw)
		l, err := m.GetOrCreate(tpA, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		leo := fill(t, l, 20, 3, 40)
		if err := l.AdvanceLogStartOffset(45, leo); err != nil {
			t.Fatal(err)
		}
		hw.set(tpA, leo)
		if err := errors.Join(l.Flush(), m.CheckpointRecoveryPoints(), m.CheckpointHighWatermarks()); err != nil {
			t.Fatal(err)
		}
		crashed := mem.CrashClone(seed)
		m.Abandon()
		m2 := openManager(t, crashed, &hwTable{m: map[TopicPartition]int64{}})
		r, ok := m2.Log(tpA)
		if !ok {
			t.Fatalf("seed %d: offline: %v", seed, m2.Offline())
		}
		if r.LogStartOffset() != 45 || r.LogEndOffset() != leo {
			t.Fatalf("seed %d: reopened [%d, %d), want [45, %d): flushed records lost", seed, r.LogStartOffset(), r.LogEndOffset(), leo)
		}
		for off := int64(45); off < leo; off++ {
			checkReadAt(t, r, off)
		}
		if h, _ := m2.RecoveredHighWatermark(tpA); h != leo {
			t.Fatal(fmt.Sprintf("seed %d: HW %d, want %d", seed, h, leo))
		}
		m2.Close()
	}
}

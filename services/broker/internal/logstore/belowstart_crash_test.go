package logstore

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
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

// DeleteRecords moves the log start to the log end, and the power fails
// before the records' tail was flushed: the tail is lost and the log
// start checkpoint lies beyond every record left. The log comes back
// empty at that log start, as Kafka's loader restarts it: the records
// below it are deleted, and its next offset does not go back below
// offsets already handed out (new records took them again).
func TestALogStartBeyondTheRecoveredEndRestartsTheLogThere(t *testing.T) {
	dir := t.TempDir() + "/t-0"
	cfg := smallConfig()
	l, err := Open(Options{FS: vfs.OS, Dir: dir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	appendLeader(t, l, plain(3, 40, 1), 4)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	flushed := l.active().size.Load()
	for range 3 {
		appendLeader(t, l, plain(3, 40, 1), 4)
	}
	leo := l.LogEndOffset()
	if err := l.AdvanceLogStartOffset(leo, leo); err != nil {
		t.Fatal(err)
	}
	rp := l.RecoveryPoint()
	l.Abandon()
	// The power loss: the unflushed tail is gone.
	seg := dir + "/" + offsetName(0, logSuffix)
	if err := os.Truncate(seg, flushed); err != nil {
		t.Fatal(err)
	}
	for range 2 { // and again after a clean close
		r, err := Open(Options{FS: vfs.OS, Dir: dir, Config: cfg, RecoveryPoint: rp, LogStartOffset: leo})
		if err != nil {
			t.Fatal(err)
		}
		if r.LogStartOffset() != leo || r.LogEndOffset() != leo {
			t.Fatalf("reopened [%d, %d), want [%d, %d)", r.LogStartOffset(), r.LogEndOffset(), leo, leo)
		}
		if res, err := r.Read(leo, 1<<20, leo); err != nil || len(res.Records) != 0 {
			t.Fatalf("read at the log end: %d bytes, %v", len(res.Records), err)
		}
		if _, err := os.Stat(seg); !os.IsNotExist(err) {
			t.Fatalf("the segment below the log start is still there: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(Options{FS: vfs.OS, Dir: dir, Config: cfg, CleanShutdown: true, LogStartOffset: leo})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if info := appendLeader(t, r, plain(2, 10, 1), 5); info.FirstOffset != leo {
		t.Fatalf("the next record got offset %d, want %d", info.FirstOffset, leo)
	}
	readAll(t, r, leo, r.LogEndOffset(), 1<<20)
}

// A power loss while retention or DeleteRecords retires the first segment
// may keep its rename and, the file system not ordering directory entries,
// lose the entry of the segment after it (rolled since the last flush) but
// keep a later one's. Loading then found that later segment first and took
// its base for the log start: records the log had, between the log start
// and that base, were gone for good, and a replica that came back so and
// led moved every follower's log start up past records they had
// acknowledged. The retirement now makes the directory's entries durable
// before its first rename, so a kept rename implies kept entries after it.
func TestARetirementsRenameOutlivesNoEntryOfTheSegmentsAfterIt(t *testing.T) {
	fsys := &cloneAtRetireFS{MemFS: newMem(t), cloned: make(chan struct{})}
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20 // the test rolls
	cfg.Preallocate = false
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg})
	roll := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := l.rollLocked(l.LogEndOffset(), false); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, l, 5, 2, 40) // segment 0, flushed with its entry
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	durable := l.LogEndOffset()
	roll()
	second := l.LogEndOffset()
	fill(t, l, 5, 2, 40)
	roll()
	third := l.LogEndOffset()
	fill(t, l, 2, 2, 40)
	start := second + 2 // inside the second segment: only the first goes
	fsys.armed.Store(true)
	if err := l.AdvanceLogStartOffset(start, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fsys.cloned:
	case <-time.After(10 * time.Second):
		t.Fatal("the first segment's files were not renamed for retirement within 10 s")
	}
	rose := 0
	for seed, crashed := range fsys.clones {
		r := openLogOpts(t, Options{FS: crashed, Dir: testDir, Config: cfg, LogStartOffset: start, RecoveryPoint: durable})
		if r.LogStartOffset() > start {
			rose++
			t.Errorf("crash seed %d: log start %d (LEO %d) above the checkpointed %d: records %d..%d the log had are gone (third segment at %d)",
				seed, r.LogStartOffset(), r.LogEndOffset(), start, start, r.LogStartOffset()-1, third)
		}
	}
	t.Logf("%d of %d power losses raised the log start", rose, len(fsys.clones))
}

// cloneAtRetireFS takes CrashClones, once armed, right after the first
// rename of a segment file to .deleted, and holds back writes of the leader
// epoch checkpoint (whose directory sync would make every entry durable)
// until it has.
type cloneAtRetireFS struct {
	*vfs.MemFS
	armed  atomic.Bool
	once   sync.Once
	clones []*vfs.MemFS
	cloned chan struct{}
}

func (f *cloneAtRetireFS) Rename(oldname, newname string) error {
	f.holdEpochCheckpoint(newname)
	err := f.MemFS.Rename(oldname, newname)
	if err == nil && f.armed.Load() && strings.HasSuffix(newname, logSuffix+deletedSuffix) {
		f.once.Do(func() {
			for seed := range uint64(64) {
				f.clones = append(f.clones, f.MemFS.CrashClone(seed))
			}
			close(f.cloned)
		})
	}
	return err
}

func (f *cloneAtRetireFS) Create(name string) (vfs.File, error) {
	f.holdEpochCheckpoint(name)
	return f.MemFS.Create(name)
}

func (f *cloneAtRetireFS) holdEpochCheckpoint(name string) {
	if f.armed.Load() && strings.Contains(name, epochCheckpointFile) {
		<-f.cloned
	}
}

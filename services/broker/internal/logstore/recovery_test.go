package logstore

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

// written builds a log of n batches in a fresh MemFS, closes it cleanly and
// returns the file system and the LEO.
func written(t *testing.T, n int) (*vfs.MemFS, int64) {
	t.Helper()
	fsys := newMem(t)
	l, err := Open(Options{FS: fsys, Dir: testDir, Config: smallConfig()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		appendLeader(t, l, plain(3, 40, int64(1000+i)), int32(i/10))
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys, leo
}

func segmentFiles(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	ents, err := fsys.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), logSuffix) {
			out = append(out, testDir+"/"+e.Name())
		}
	}
	return out
}

func editFile(t *testing.T, fsys vfs.FS, path string, edit func([]byte) []byte) {
	t.Helper()
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	data = edit(data)
	f, err := fsys.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(data, 0)
	f.Sync()
	f.Close()
}

func TestRecoveryCutsTornTail(t *testing.T) {
	for _, clean := range []bool{false, true} {
		fsys, leo := written(t, 40)
		segs := segmentFiles(t, fsys)
		last := segs[len(segs)-1]
		editFile(t, fsys, last, func(b []byte) []byte {
			// Half of a copy of the first batch: a torn write.
			return append(b, b[:len(b)/2]...)
		})
		l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: clean})
		if l.LogEndOffset() != leo || l.Stats().RecoveredTruncations != 1 {
			t.Fatalf("clean=%v: LEO %d (want %d), truncations %d", clean, l.LogEndOffset(), leo, l.Stats().RecoveredTruncations)
		}
		readAll(t, l, 0, leo, 1<<20)
		appendLeader(t, l, plain(1, 1, 1), 9)
		readAll(t, l, 0, l.LogEndOffset(), 1<<20)
	}
}

func TestRecoveryCutsAtCorruptionAndDropsLaterSegments(t *testing.T) {
	fsys, leo := written(t, 60)
	segs := segmentFiles(t, fsys)
	victim := segs[2]
	var cutAt int64
	editFile(t, fsys, victim, func(b []byte) []byte {
		// Flip a byte inside the second batch of the segment.
		_, size, _ := firstBatchSize(b)
		b[size+70] ^= 0x55
		return b
	})
	base, _ := parseOffsetName(victim[len(testDir)+1:], logSuffix)
	cutAt = base + 3 // the segment keeps its first batch (3 records)
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), RecoveryPoint: 0})
	if l.LogEndOffset() != cutAt {
		t.Fatalf("LEO %d, want %d (was %d)", l.LogEndOffset(), cutAt, leo)
	}
	if got := len(segmentFiles(t, fsys)); got != 3 {
		t.Fatalf("%d segment files left, want 3", got)
	}
	if l.Stats().RecoveredTruncations != 1 {
		t.Fatalf("RecoveredTruncations %d", l.Stats().RecoveredTruncations)
	}
	readAll(t, l, 0, cutAt, 1<<20)
	// Epochs beyond the recovered LEO are gone.
	for _, e := range l.EpochEntries() {
		if e.StartOffset >= cutAt {
			t.Fatalf("epoch entry %v beyond LEO %d", e, cutAt)
		}
	}
}

func firstBatchSize(b []byte) (int64, int64, bool) {
	if len(b) < 12 {
		return 0, 0, false
	}
	n := int64(b[8])<<24 | int64(b[9])<<16 | int64(b[10])<<8 | int64(b[11])
	return 0, n + 12, true
}

func TestRecoveryStartsAtRecoveryPoint(t *testing.T) {
	fsys, leo := written(t, 60)
	segs := segmentFiles(t, fsys)
	// Damage an early segment; a recovery point past it means it is trusted
	// (only its index is sanity-checked), so the damage is not looked for.
	editFile(t, fsys, segs[0], func(b []byte) []byte { b[100] ^= 1; return b })
	later, _ := parseOffsetName(segs[3][len(testDir)+1:], logSuffix)
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), RecoveryPoint: later})
	if l.LogEndOffset() != leo || l.Stats().RecoveredTruncations != 0 {
		t.Fatalf("LEO %d truncations %d", l.LogEndOffset(), l.Stats().RecoveredTruncations)
	}
	if l.RecoveryPoint() != later {
		t.Fatalf("recovery point %d, want %d", l.RecoveryPoint(), later)
	}
}

func TestRecoveryRebuildsMissingAndCorruptIndexes(t *testing.T) {
	fsys, leo := written(t, 60)
	segs := segmentFiles(t, fsys)
	idx := func(i int, suffix string) string { return strings.TrimSuffix(segs[i], logSuffix) + suffix }
	fsys.Remove(idx(0, indexSuffix))
	fsys.Remove(idx(1, timeIndexSuffix))
	editFile(t, fsys, idx(2, indexSuffix), func(b []byte) []byte { return append(b, 1, 2, 3) }) // not whole entries
	editFile(t, fsys, idx(3, indexSuffix), func(b []byte) []byte {
		// Last entry points at a position that is not a batch.
		b[len(b)-1] ^= 0x3
		return b
	})
	editFile(t, fsys, idx(len(segs)-1, indexSuffix), func(b []byte) []byte {
		return append(b, 0, 0, 0, 9, 0xff, 0xff, 0, 0) // beyond the file
	})
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	if got := l.Stats().RebuiltIndexes; got != 5 {
		t.Fatalf("RebuiltIndexes %d, want 5", got)
	}
	if l.LogEndOffset() != leo || l.Stats().RecoveredTruncations != 0 {
		t.Fatalf("LEO %d truncations %d", l.LogEndOffset(), l.Stats().RecoveredTruncations)
	}
	for off := int64(0); off < leo; off++ {
		checkReadAt(t, l, off)
	}
	if _, err := fsys.Stat(idx(0, indexSuffix)); err != nil {
		t.Fatal("rebuilt index not on disk")
	}
}

func TestRecoveryDropsSegmentsAfterAGap(t *testing.T) {
	fsys, _ := written(t, 60)
	segs := segmentFiles(t, fsys)
	fsys.Remove(segs[2])
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	want, _ := parseOffsetName(segs[2][len(testDir)+1:], logSuffix)
	if l.LogEndOffset() != want || len(l.segments()) != 2 || l.Stats().RecoveredTruncations != 1 {
		t.Fatalf("LEO %d (want %d), %d segments, truncations %d", l.LogEndOffset(), want, len(l.segments()), l.Stats().RecoveredTruncations)
	}
	if got := len(segmentFiles(t, fsys)); got != 2 {
		t.Fatalf("%d segment files left", got)
	}
}

func TestRecoveryClearsLeftovers(t *testing.T) {
	fsys, leo := written(t, 5)
	for _, name := range []string{"00000000000000009999.index", "00000000000000009999.timeindex", "leader-epoch-checkpoint.tmp", "x.snapshot.tmp"} {
		f, _ := fsys.Create(testDir + "/" + name)
		f.Close()
	}
	// A snapshot beyond the LEO cannot describe this log.
	f, _ := fsys.Create(testDir + "/" + offsetName(leo+50, snapshotSuffix))
	f.Close()
	openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	ents, _ := fsys.ReadDir(testDir)
	for _, e := range ents {
		n := e.Name()
		if strings.Contains(n, "9999") || strings.HasSuffix(n, ".tmp") || n == offsetName(leo+50, snapshotSuffix) {
			t.Fatalf("leftover %s not removed", n)
		}
	}
}

func TestRecoveryOfAllZeroTail(t *testing.T) {
	// A crash after the file grew but before the data reached the disk.
	fsys, leo := written(t, 8)
	segs := segmentFiles(t, fsys)
	editFile(t, fsys, segs[len(segs)-1], func(b []byte) []byte { return append(b, make([]byte, 300)...) })
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig()})
	if l.LogEndOffset() != leo || l.Stats().RecoveredTruncations != 1 {
		t.Fatalf("LEO %d, truncations %d", l.LogEndOffset(), l.Stats().RecoveredTruncations)
	}
}

func TestOpenErrorsNameTheFile(t *testing.T) {
	fsys, _ := written(t, 30)
	ffs := vfs.NewFaultFS(fsys)
	remove := ffs.Inject(vfs.Fault{Ops: vfs.OpReadDir, Path: testDir, Err: syscall.EACCES})
	_, err := Open(Options{FS: ffs, Dir: testDir, Config: smallConfig()})
	if kerr.CodeOf(err) != kerr.KafkaStorageError || !strings.Contains(err.Error(), testDir) || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("unreadable dir: %v", err)
	}
	remove()
	seg := segmentFiles(t, fsys)[1]
	ffs.Inject(vfs.Fault{Ops: vfs.OpRead, Path: seg, Err: syscall.EIO})
	_, err = Open(Options{FS: ffs, Dir: testDir, Config: smallConfig()})
	if kerr.CodeOf(err) != kerr.KafkaStorageError || !strings.Contains(err.Error(), seg) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("unreadable segment: %v", err)
	}
}

func TestCleanReopenKeepsEverything(t *testing.T) {
	fsys, leo := written(t, 50)
	before, _ := vfs.ReadFile(fsys, segmentFiles(t, fsys)[0])
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	st := l.Stats()
	if st.LogEndOffset != leo || st.RecoveryPoint != leo || st.RecoveredTruncations != 0 || st.RebuiltIndexes != 0 {
		t.Fatalf("stats after clean reopen %+v", st)
	}
	after, _ := vfs.ReadFile(fsys, segmentFiles(t, fsys)[0])
	if !bytes.Equal(before, after) {
		t.Fatal("a clean reopen changed a segment")
	}
	readAll(t, l, 0, leo, 1<<20)
	if e := l.EpochEntries(); len(e) != 5 {
		t.Fatalf("epochs %v", e)
	}
}

func TestAbandonThenRecover(t *testing.T) {
	fsys := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m := openManager(t, fsys, hw)
	l, _ := m.GetOrCreate(tpA, smallConfig())
	leo := fill(t, l, 20, 3, 40)
	m.Abandon()
	if _, err := l.AppendAsLeader(plain(1, 1, 1).build(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Abandon: %v", err)
	}
	if _, err := fsys.Stat("/data/" + cleanShutdownMarkerFile); err == nil {
		t.Fatal("Abandon wrote a clean-shutdown marker")
	}
	m2 := openManager(t, fsys, hw)
	defer m2.Close()
	l2, _ := m2.Log(tpA)
	if m2.HadCleanShutdown() || l2.LogEndOffset() != leo {
		t.Fatalf("after abandon: clean %v, LEO %d, want %d", m2.HadCleanShutdown(), l2.LogEndOffset(), leo)
	}
	readAll(t, l2, 0, leo, 1<<20)
}

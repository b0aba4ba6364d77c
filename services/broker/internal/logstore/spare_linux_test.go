package logstore

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// allocatedBytes is the bytes of disk blocks a file holds (st_blocks).
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// appendUntil appends 64 KiB batches as leader until the active segment
// holds at least n bytes or a roll starts a new one.
func appendUntil(t *testing.T, l *Log, n int64) {
	t.Helper()
	act := l.active()
	for l.active() == act && act.size.Load() < n {
		appendLeader(t, l, plain(16, 4000, l.now().UnixMilli()), 0)
	}
}

// reservedSlack is what a file may hold past its bytes without a
// reservation: its last partial block and extent-tree blocks.
const reservedSlack = 256 << 10

// With preallocate every segment holds its blocks before its first append:
// a new log's first segment reserves them when it is created, each later
// one starts from the spare file made while the segment before it was
// half full (by size or by age), and a segment gives back what it did not
// use when it is sealed or closed. The file's size is always its bytes.
func TestPreallocateReservesEverySegmentBeforeItIsWritten(t *testing.T) {
	dir := t.TempDir() + "/p-0"
	clk := newClock()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	cfg.SegmentMs = time.Hour
	cfg.Preallocate = true
	files := NewFileCache(0)
	l, err := Open(Options{Dir: dir, Config: cfg, Files: files, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	spare := dir + "/" + spareName
	first := l.active()
	if got := allocatedBytes(t, first.logPath); got < cfg.SegmentBytes {
		t.Fatalf("a new log's first segment holds %d bytes of blocks before any append; want segment.bytes (%d) reserved", got, cfg.SegmentBytes)
	}
	if got := fileSize(t, first.logPath); got != 0 {
		t.Fatalf("a reserved, empty segment's size is %d; want 0", got)
	}

	// Below half full and half segment.ms: no spare.
	appendUntil(t, l, cfg.SegmentBytes/2-128<<10)
	l.bg.Wait()
	if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a spare exists while the active segment is under half full (stat: %v)", err)
	}
	// Past half full: the spare is made in the background.
	appendUntil(t, l, cfg.SegmentBytes/2+128<<10)
	l.bg.Wait()
	if got := allocatedBytes(t, spare); got < cfg.SegmentBytes {
		t.Fatalf("the spare holds %d bytes of blocks; want %d", got, cfg.SegmentBytes)
	}
	if got := fileSize(t, spare); got != 0 {
		t.Fatalf("the spare's size is %d; want 0", got)
	}

	// The roll by size renames the spare into place.
	appendUntil(t, l, cfg.SegmentBytes)
	l.bg.Wait()
	segs := l.segments()
	if len(segs) != 2 {
		t.Fatalf("%d segments; want a roll", len(segs))
	}
	second := segs[1]
	if got, size := allocatedBytes(t, second.logPath), fileSize(t, second.logPath); got < cfg.SegmentBytes-size {
		t.Fatalf("the segment after a roll holds %d bytes of blocks (%d written); want it to start from the reserved spare", got, size)
	}
	if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spare is still there after the roll took it (stat: %v)", err)
	}

	// Half of segment.ms on a nearly empty segment makes the next spare;
	// the roll by age then seals a small segment, which gives back what
	// it did not use.
	clk.Advance(31 * time.Minute)
	appendLeader(t, l, plain(1, 100, clk.Now().UnixMilli()), 0)
	l.bg.Wait()
	if got := allocatedBytes(t, spare); got < cfg.SegmentBytes {
		t.Fatalf("half way to segment.ms the spare holds %d bytes of blocks; want %d", got, cfg.SegmentBytes)
	}
	clk.Advance(30 * time.Minute)
	appendLeader(t, l, plain(1, 100, clk.Now().UnixMilli()), 0)
	l.bg.Wait()
	segs = l.segments()
	if len(segs) != 3 {
		t.Fatalf("%d segments; want a roll by segment.ms", len(segs))
	}
	if got, size := allocatedBytes(t, second.logPath), fileSize(t, second.logPath); got > size+reservedSlack {
		t.Fatalf("the sealed segment holds %d bytes of blocks for %d bytes; want its reservation given back", got, size)
	}
	if got := allocatedBytes(t, segs[2].logPath); got < cfg.SegmentBytes {
		t.Fatalf("the segment after the roll by age holds %d bytes of blocks; want %d", got, cfg.SegmentBytes)
	}
	if st := files.Stats(); st.ReservedSegments != 3 || st.ReserveFailures != 0 {
		t.Fatalf("stats: %d segments reserved, %d failures; want 3 and 0", st.ReservedSegments, st.ReserveFailures)
	}

	// Close gives back the active segment's reservation; reading back
	// finds every record.
	leo := l.LogEndOffset()
	if got := readAll(t, l, 0, leo, 1<<20); got[len(got)-1].NextOffset() != leo {
		t.Fatalf("read back up to %d; want %d", got[len(got)-1].NextOffset(), leo)
	}
	last := segs[2].logPath
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, size := allocatedBytes(t, last), fileSize(t, last); got > size+reservedSlack {
		t.Fatalf("after Close the active segment holds %d bytes of blocks for %d bytes; want its reservation given back", got, size)
	}

	// Opened again with preallocate, the active segment is reserved again
	// before any append.
	l2, err := Open(Options{Dir: dir, Config: cfg, Files: files, Now: clk.Now, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogEndOffset() != leo {
		t.Fatalf("LEO after reopening %d; want %d", l2.LogEndOffset(), leo)
	}
	if got := allocatedBytes(t, last); got < cfg.SegmentBytes {
		t.Fatalf("the loaded active segment holds %d bytes of blocks; want %d reserved", got, cfg.SegmentBytes)
	}
}

// A crash leaves the spare file and the active segment's reservation;
// loading without preallocate deletes the one and gives back the other,
// and recovery finds nothing to cut: the file's size was its bytes all
// along.
func TestLoadGivesBackWhatACrashLeftReserved(t *testing.T) {
	dir := t.TempDir() + "/p-0"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	cfg.Preallocate = true
	l, err := Open(Options{Dir: dir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	appendUntil(t, l, cfg.SegmentBytes/2+128<<10)
	l.bg.Wait()
	act, leo := l.active().logPath, l.LogEndOffset()
	spare := dir + "/" + spareName
	if got := allocatedBytes(t, spare); got < cfg.SegmentBytes {
		t.Fatalf("the spare holds %d bytes of blocks; want %d", got, cfg.SegmentBytes)
	}
	l.Abandon()
	if got, size := allocatedBytes(t, act), fileSize(t, act); got < cfg.SegmentBytes || size >= cfg.SegmentBytes {
		t.Fatalf("before reloading the active segment holds %d bytes of blocks for %d bytes; want the reservation the crash left", got, size)
	}

	cfg.Preallocate = false
	l2, err := Open(Options{Dir: dir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogEndOffset() != leo {
		t.Fatalf("LEO after the crash %d; want %d", l2.LogEndOffset(), leo)
	}
	if st := l2.Stats(); st.RecoveredTruncations != 0 {
		t.Fatalf("recovery cut the log %d times; want none", st.RecoveredTruncations)
	}
	if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spare a crash left is still there (stat: %v)", err)
	}
	if got, size := allocatedBytes(t, act), fileSize(t, act); got > size+reservedSlack {
		t.Fatalf("the loaded active segment holds %d bytes of blocks for %d bytes; want the crash's reservation given back", got, size)
	}
	if got := readAll(t, l2, 0, leo, 1<<20); got[len(got)-1].NextOffset() != leo {
		t.Fatalf("read back up to %d; want %d", got[len(got)-1].NextOffset(), leo)
	}
}

// refusingFS is the OS file system whose files refuse every reservation,
// as a full disk does.
type refusingFS struct {
	vfs.FS
	calls atomic.Int64
}

type refusingFile struct {
	vfs.File
	fs *refusingFS
}

func (f *refusingFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return refusingFile{file, f}, nil
}

func (f *refusingFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return refusingFile{file, f}, nil
}

func (f refusingFile) ReserveBlocks(int64) error {
	f.fs.calls.Add(1)
	return syscall.ENOSPC
}

func (f refusingFile) AllocatedBytes() (int64, error) { return 0, errors.ErrUnsupported }

// A file system that refuses reservations (full) or cannot make them
// (MemFS) costs nothing but the reservation: appends, rolls and reads go
// on, each refusal is counted, and a refused spare is not asked for again
// on every append, only once per segment.
func TestPreallocateRefusedAppendsAsWithout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.Preallocate = true
	for _, tc := range []struct {
		name   string
		fsys   vfs.FS
		refuse *refusingFS
	}{
		{name: "full disk", refuse: &refusingFS{FS: vfs.OS}},
		{name: "MemFS", fsys: newMem(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := tc.fsys, testDir
			if tc.refuse != nil {
				fsys, dir = tc.refuse, t.TempDir()+"/p-0"
			}
			files := NewFileCache(0)
			l, err := Open(Options{FS: fsys, Dir: dir, Config: cfg, Files: files})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for len(l.segments()) < 4 {
				appendLeader(t, l, plain(16, 4000, 1000), 0)
				l.bg.Wait()
			}
			leo := l.LogEndOffset()
			if got := readAll(t, l, 0, leo, 1<<20); got[len(got)-1].NextOffset() != leo {
				t.Fatalf("read back up to %d; want %d", got[len(got)-1].NextOffset(), leo)
			}
			st := files.Stats()
			if st.ReservedSegments != 0 {
				t.Fatalf("%d segments counted as reserved; want 0", st.ReservedSegments)
			}
			if tc.refuse == nil {
				if st.ReserveFailures != 0 {
					t.Fatalf("%d failures counted where reserving is not possible; want 0", st.ReserveFailures)
				}
				return
			}
			// The first segment's reservation, then one spare per
			// segment that reached half full (the fourth may have).
			if calls := tc.refuse.calls.Load(); calls < 4 || calls > 5 || st.ReserveFailures != calls {
				t.Fatalf("%d reservations asked for and %d failures counted over 4 segments; want 4 or 5 of each", calls, st.ReserveFailures)
			}
			if _, err := os.Stat(dir + "/" + spareName); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused spare was left behind (stat: %v)", err)
			}
		})
	}
}

package logstore

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts which of the file's pages in [from, to) are in the
// page cache (mincore of a read-only mapping, which itself reads nothing).
func residentPages(t *testing.T, path string, from, to int64) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := unix.Mmap(int(f.Fd()), 0, int(to), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	page := int64(os.Getpagesize())
	vec := make([]byte, (to+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for i := from / page; i < int64(len(vec)); i++ {
		pages++
		if vec[i]&1 != 0 {
			resident++
		}
	}
	return resident, pages
}

// diskTempDir is a test directory whose pages can leave the page cache:
// the test is skipped on tmpfs, where the pages are the data.
func diskTempDir(t *testing.T) string {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is tmpfs: its pages are the data and are never dropped (run with TMPDIR on a disk)", dir)
	}
	return dir
}

// On real files a follower's pages behind its tail leave the page cache and
// its tail stays; every record still reads back whole (from the device).
func TestFollowerDropsPagesFromThePageCache(t *testing.T) {
	dir := diskTempDir(t)
	cfg := dropConfig()
	cfg.SegmentBytes = 8 << 20 // one segment
	l, err := Open(Options{Dir: dir + "/follower", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for l.LogEndOffset() < 4000 { // about 4 MiB
		if _, err := l.AppendAsFollower(followerBatch(l.LogEndOffset(), 20, 1000)); err != nil {
			t.Fatal(err)
		}
		l.bg.Wait()
		// Written and clean before the next append's drop reaches it: a
		// page still being written back is kept (the kernel's rule), which
		// would make this test depend on the device's speed.
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	act := l.active()
	size, droppedTo := act.size.Load(), act.droppedTo.Load()
	if droppedTo < size-cfg.FollowerCachedBytes-cfg.WritebackBytes-dropAlign {
		t.Fatalf("dropped up to %d of %d bytes; want all but the last %d", droppedTo, size, cfg.FollowerCachedBytes)
	}
	if res, n := residentPages(t, act.logPath, 0, droppedTo); res > n/20 {
		t.Fatalf("%d of the %d pages behind the tail are still in the page cache", res, n)
	}
	tailFrom := droppedTo + dropAlign // the page at droppedTo may hold bytes of both
	if res, n := residentPages(t, act.logPath, tailFrom, size); res < n*9/10 {
		t.Fatalf("only %d of the tail's %d pages are in the page cache", res, n)
	}
	if got := readAll(t, l, 0, l.LogEndOffset(), 1<<20); len(got) == 0 || got[len(got)-1].NextOffset() != l.LogEndOffset() {
		t.Fatalf("read back %d batches, not up to %d", len(got), l.LogEndOffset())
	}
}

// On real files a follower's sealed segment leaves the page cache whole
// once the segment after it holds the window.
func TestFollowerSealedSegmentLeavesThePageCache(t *testing.T) {
	dir := diskTempDir(t)
	cfg := dropConfig() // 1 MiB segments
	l, err := Open(Options{Dir: dir + "/follower", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for len(l.segments()) < 2 || l.active().size.Load() < cfg.FollowerCachedBytes+2*cfg.WritebackBytes {
		if _, err := l.AppendAsFollower(followerBatch(l.LogEndOffset(), 20, 1000)); err != nil {
			t.Fatal(err)
		}
		l.bg.Wait() // the roll's flush and drop included
	}
	sealed := l.segments()[0]
	if res, n := residentPages(t, sealed.logPath, 0, sealed.size.Load()); res > n/20 {
		t.Fatalf("%d of the sealed segment's %d pages are still in the page cache", res, n)
	}
}

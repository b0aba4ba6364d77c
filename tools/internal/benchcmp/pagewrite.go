package benchcmp

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

// PageWrite is what writing a file costs this machine's CPU per KiB, into
// pages the page cache does not hold yet (every append to a log: a new
// page) and into pages it holds (the same bytes written again). On bare
// metal the two differ by a small factor; a virtual machine whose host
// takes back the guest's free memory (a balloon with free page
// reporting) faults every new page in again at the host, and then the
// appends of every replica of both systems, not their work, price each
// byte written.
type PageWrite struct {
	Fresh  time.Duration `json:"fresh_ns_per_kib"`
	Cached time.Duration `json:"cached_ns_per_kib"`
}

// pageWriteBytes is what the harness writes to price it: 0.5-3 s of CPU
// here. Pages freed a moment ago (a file just deleted) are still the
// guest's and cost a fraction of the others; a shape writes gigabytes, so
// the price is averaged over more than such leftovers.
const pageWriteBytes = 1 << 30

// pageWriteChunk is one write, the size of a batch a follower appends.
const pageWriteChunk = 64 << 10

// measurePageWrite writes size bytes to a new file in dir in chunks of
// pageWriteChunk, then the same bytes again over them, timing each pass's
// CPU on one locked thread, and removes the file (its dirty pages are
// dropped with it, never written back).
func measurePageWrite(dir string, size int64) (PageWrite, error) {
	if size < pageWriteChunk {
		return PageWrite{}, fmt.Errorf("measuring page writes: size %d is below one write of %d", size, pageWriteChunk)
	}
	f, err := os.CreateTemp(dir, "tidemark-pagewrite-")
	if err != nil {
		return PageWrite{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, pageWriteChunk)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pass := func() (time.Duration, error) {
		cpu0, err := threadCPU()
		if err != nil {
			return 0, err
		}
		for off := int64(0); off+pageWriteChunk <= size; off += pageWriteChunk {
			if _, err := f.WriteAt(buf, off); err != nil {
				return 0, err
			}
		}
		cpu1, err := threadCPU()
		if err != nil {
			return 0, err
		}
		return (cpu1 - cpu0) / time.Duration(size>>10), nil
	}
	fresh, err := pass()
	if err != nil {
		return PageWrite{}, err
	}
	cached, err := pass()
	if err != nil {
		return PageWrite{}, err
	}
	return PageWrite{Fresh: fresh, Cached: cached}, nil
}

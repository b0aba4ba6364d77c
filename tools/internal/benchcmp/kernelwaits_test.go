package benchcmp

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A sampler over a scripted thread table: each thread's state at each
// sample, in order.
func TestWaitSamplerTimesEachSleep(t *testing.T) {
	script := map[int]string{
		7: "RDDDDDDDDDR", // asleep 16 ms (samples 1 to 9, 2 ms apart): kept
		8: "RDDRRRRRRRR", // 4 ms: too short
		9: "RRRRRRRRDDD", // still asleep at the end: closed by finish
	}
	step := 0
	w := newWaitSampler(map[int]string{100: "broker-2"})
	w.tasks = func(int) []int { return []int{7, 8, 9} }
	w.state = func(_, tid int) (byte, error) { return script[tid][step], nil }
	w.stack = func(_, tid int) []string { return []string{"frame-of-" + string(rune('0'+tid))} }
	t0 := time.Unix(1000, 0)
	for step = 0; step < 11; step++ {
		w.sample(t0.Add(time.Duration(step) * 2 * time.Millisecond))
	}
	waits := w.finish(t0.Add(40 * time.Millisecond))
	if len(waits) != 2 {
		t.Fatalf("waits %+v, want threads 7 and 9", waits)
	}
	if w := waits[0]; w.TID != 9 || w.Took != 24*time.Millisecond || w.Process != "broker-2" || w.Stack[0] != "frame-of-9" {
		t.Errorf("longest %+v, want thread 9 asleep from 16 ms to the end at 40 ms", w)
	}
	if w := waits[1]; w.TID != 7 || w.Took != 18*time.Millisecond || !w.Began.Equal(t0.Add(2*time.Millisecond)) {
		t.Errorf("second %+v, want thread 7 from 2 ms, seen awake at 20 ms", w)
	}
}

func TestStatStateAndStackFrames(t *testing.T) {
	// The command is in parentheses and may hold both spaces and ')'.
	if st, err := statState("4242 (tidemark (x) y) D 1 4242 4242 0 -1"); err != nil || st != 'D' {
		t.Fatalf("statState = %q, %v", st, err)
	}
	if _, err := statState("garbage"); err == nil {
		t.Fatal("no error for a line without a state")
	}
	got := stackFrames("[<0>] ext4_da_write_end+0x1b/0x40\n[<0>] vfs_write+0x29c/0x4c0\n")
	if strings.Join(got, ",") != "ext4_da_write_end,vfs_write" {
		t.Fatalf("frames %q", got)
	}
}

func TestWriteKernelWaitsSaysTheLongest(t *testing.T) {
	var log bytes.Buffer
	path := filepath.Join(t.TempDir(), "run1-kernel-waits.txt")
	waits := []kernelWait{
		{Process: "broker-3", TID: 12, Began: time.Unix(0, 0), Took: 123 * time.Millisecond, Stack: []string{"ext4_da_write_end", "generic_perform_write", "vfs_write", "ksys_pwrite64"}},
		{Process: "broker-1", TID: 5, Began: time.Unix(0, 0), Took: 15 * time.Millisecond},
	}
	if err := writeKernelWaits(&log, path, waits); err != nil {
		t.Fatal(err)
	}
	if want := "2, longest 123.0 ms on broker-3 in ext4_da_write_end < generic_perform_write < vfs_write"; !strings.Contains(log.String(), want) {
		t.Fatalf("log %q, want %q", log.String(), want)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "broker-3 thread 12: 123.0 ms") || !strings.Contains(string(b), "  ksys_pwrite64\n") {
		t.Fatalf("file:\n%s", b)
	}
	log.Reset()
	if err := writeKernelWaits(&log, path, nil); err != nil || !strings.Contains(log.String(), "none") {
		t.Fatalf("no waits: log %q, err %v", log.String(), err)
	}
}

// On real threads: this process's own thread in a long fsync is seen, with
// the fsync in its kernel stack where the stack is readable (root).
func TestSamplerSeesAThreadInAnFsync(t *testing.T) {
	dir := t.TempDir()
	var longest time.Duration // of the fsyncs long enough to be seen
	for attempt, size := 1, 64<<20; attempt <= 3; attempt, size = attempt+1, size*2 {
		f, err := os.Create(filepath.Join(dir, "dirty"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Repeat([]byte("k"), size)); err != nil {
			t.Fatal(err)
		}
		stop := sampleKernelWaits(context.Background(), map[int]string{os.Getpid(): "self"})
		start := time.Now()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		time.Sleep(3 * kernelWaitEvery) // a sample after the fsync ends the wait
		waits := stop()
		f.Close()
		t.Logf("attempt %d: %d MiB fsync took %v; waits %+v", attempt, size>>20, took, waits)
		for _, w := range waits {
			if w.Process != "self" || w.Took < minKernelWait {
				t.Fatalf("wait %+v", w)
			}
			stack := strings.Join(w.Stack, " ")
			if _, err := os.ReadFile("/proc/self/stack"); err == nil && !strings.Contains(stack, "sync") {
				continue // another thread's wait; the fsync's is what this looks for
			}
			return
		}
		// The device was quick (more data), or, on a loaded machine, the
		// thread spent the fsync waiting for a CPU rather than the disk
		// (runnable, not in uninterruptible sleep): try a longer one.
		if took >= 5*minKernelWait {
			longest = max(longest, took)
		}
	}
	if longest > 0 {
		t.Fatalf("no fsync was seen as a kernel wait, the longest %v", longest)
	}
	t.Fatal("every fsync was too quick to be seen; this test needs a file system on a device (TMPDIR)")
}

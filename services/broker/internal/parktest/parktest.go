//go:build linux

// Package parktest measures, for the tests and benchmarks of aiofsync and
// parkedfs, whether a call that waits on the device holds its goroutine's
// P: it samples the calling goroutine's stack while the call runs, and
// times a busy goroutine's turns around it. Both are meant to run with
// GOMAXPROCS 1, where a held P stops everything else.
package parktest

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// DiskDir is a temporary directory on a real device: on tmpfs neither an
// fsync nor freeing a file's blocks waits for anything.
func DiskDir(t testing.TB) string {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Fatalf("%s is tmpfs, where the device is never waited for: run with TMPDIR on a disk", dir)
	}
	return dir
}

// Samples is what Watch saw of the calling goroutine while its call ran.
type Samples struct {
	Total     int           // samples that found it
	Parked    int           // parked on a channel (waiting in the poller's reaper's hand-off)
	InSyscall int           // inside one of the plain system call's frames
	Took      time.Duration // the call's length
}

// Watch runs call on a goroutine of its own and samples every goroutine's
// stack until it returns, counting the samples in which the goroutine
// whose stack holds the frame named in (e.g. "parkedfs.Remove(") is parked
// on a channel, or is inside any of plainFrames (the plain system call's:
// "syscall.unlinkat"). With GOMAXPROCS 1 a call that holds the P keeps the
// sampler from running until the runtime takes the P back, and then it is
// found in the system call.
func Watch(call func() error, in string, plainFrames ...string) (Samples, error) {
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- call() }()
	var s Samples
	buf := make([]byte, 1<<20)
	for {
		select {
		case err := <-done:
			s.Took = time.Since(start)
			return s, err
		default:
		}
		stack := goroutineIn(buf[:runtime.Stack(buf, true)], in)
		if stack == "" {
			runtime.Gosched()
			continue
		}
		s.Total++
		switch {
		case containsAny(stack, plainFrames):
			s.InSyscall++
		case strings.Contains(stack, "[chan receive"):
			s.Parked++
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// goroutineIn returns the stack of the goroutine with frame in, if any,
// from a runtime.Stack(all) dump (the sampler's own is left out).
func goroutineIn(dump []byte, in string) string {
	for _, g := range strings.Split(string(dump), "\n\n") {
		if strings.Contains(g, in) && !strings.Contains(g, "parktest.goroutineIn") {
			return g
		}
	}
	return ""
}

// Turns is what a busy goroutine saw of a call: how long after the call
// began it next ran (the whole call if it never did), and its longest gap
// between turns over the call.
type Turns struct {
	FirstRun, MaxGap, Took time.Duration
}

// OthersDuring runs a busy goroutine (it yields, never sleeps, as a loaded
// broker's do) for busyBefore, then runs call, and reports the busy
// goroutine's turns around it. A busyBefore of some tens of ms lets the
// runtime's sysmon, having had nothing to take back, sleep its longest
// between looks, as in a loaded broker.
func OthersDuring(busyBefore time.Duration, call func() error) (Turns, error) {
	var began, stop atomic.Int64 // unix ns
	seen, running := make(chan Turns), make(chan struct{})
	go func() {
		var t Turns
		last := time.Now()
		close(running)
		for stop.Load() == 0 {
			runtime.Gosched()
			now := time.Now()
			if from := began.Load(); from != 0 {
				if t.FirstRun == 0 {
					t.FirstRun = now.Sub(time.Unix(0, from))
				}
				t.MaxGap = max(t.MaxGap, now.Sub(last))
			}
			last = now
		}
		seen <- t
	}()
	<-running
	time.Sleep(busyBefore)
	start := time.Now()
	began.Store(start.UnixNano())
	err := call()
	took := time.Since(start)
	stop.Store(1)
	t := <-seen
	t.Took = took
	if t.FirstRun == 0 || t.FirstRun > took {
		t.FirstRun = took // it did not run before the call returned
	}
	return t, err
}

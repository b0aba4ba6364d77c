package benchcmp

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A broker thread blocked in the kernel (state D: a page-cache write
// waiting for a lock writeback holds, an fsync, a discard) shows in
// neither a CPU profile nor a Go execution trace, which only see that a
// system call took long. The kernel-wait sampler reads the state of every
// thread of the brokers from /proc every few milliseconds and keeps each
// uninterruptible sleep at least minKernelWait long, with the kernel stack
// it was in when first seen (/proc/<pid>/task/<tid>/stack, root only;
// otherwise wchan, the function it sleeps in). Sampling costs a few
// percent of a core, so it is opt-in (Options.KernelWaits).

// kernelWaitEvery is the sampling period: waits shorter than it may be
// missed, longer ones are timed to within it.
const kernelWaitEvery = 2 * time.Millisecond

// minKernelWait is the shortest wait recorded.
const minKernelWait = 10 * time.Millisecond

// kernelWait is one uninterruptible sleep of one thread.
type kernelWait struct {
	Process string // the node's name, broker-2
	TID     int
	Began   time.Time // first seen asleep
	Took    time.Duration
	Stack   []string // innermost first, offsets stripped
}

// threadState reads a thread's state letter from /proc/<pid>/task/<tid>/stat.
type threadState func(pid, tid int) (byte, error)

// threadStack reads where a sleeping thread is in the kernel.
type threadStack func(pid, tid int) []string

// waitSampler follows the threads of some processes from sample to sample.
type waitSampler struct {
	procs map[int]string // pid → name
	state threadState
	stack threadStack
	tasks func(pid int) []int

	asleep map[[2]int]*kernelWait // (pid, tid) → its wait so far
	waits  []kernelWait
}

func newWaitSampler(procs map[int]string) *waitSampler {
	return &waitSampler{procs: procs, state: procThreadState, stack: procThreadStack, tasks: procTasks,
		asleep: map[[2]int]*kernelWait{}}
}

// sample looks at every thread once, at now.
func (w *waitSampler) sample(now time.Time) {
	seen := map[[2]int]bool{}
	for pid, name := range w.procs {
		for _, tid := range w.tasks(pid) {
			st, err := w.state(pid, tid)
			if err != nil || st != 'D' {
				continue
			}
			k := [2]int{pid, tid}
			seen[k] = true
			if w.asleep[k] == nil {
				w.asleep[k] = &kernelWait{Process: name, TID: tid, Began: now, Stack: w.stack(pid, tid)}
			}
		}
	}
	for k, kw := range w.asleep {
		if !seen[k] {
			w.end(k, kw, now)
		}
	}
}

// end closes a wait that was last seen before now.
func (w *waitSampler) end(k [2]int, kw *kernelWait, now time.Time) {
	delete(w.asleep, k)
	if kw.Took = now.Sub(kw.Began); kw.Took >= minKernelWait {
		w.waits = append(w.waits, *kw)
	}
}

// finish closes the waits still open and returns them all, longest first.
func (w *waitSampler) finish(now time.Time) []kernelWait {
	for k, kw := range w.asleep {
		w.end(k, kw, now)
	}
	slices.SortFunc(w.waits, func(a, b kernelWait) int { return int(b.Took - a.Took) })
	return w.waits
}

// sampleKernelWaits samples the processes' threads until the returned stop
// is called (or ctx ends) and stop returns the waits seen.
func sampleKernelWaits(ctx context.Context, procs map[int]string) (stop func() []kernelWait) {
	w := newWaitSampler(procs)
	done, result := make(chan struct{}), make(chan []kernelWait, 1)
	go func() {
		t := time.NewTicker(kernelWaitEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- w.finish(time.Now())
				return
			case <-ctx.Done():
				result <- w.finish(time.Now())
				return
			case now := <-t.C:
				w.sample(now)
			}
		}
	}()
	var waits []kernelWait
	return func() []kernelWait {
		if done != nil {
			close(done)
			waits, done = <-result, nil
		}
		return waits
	}
}

// writeKernelWaits writes the waits to path, one per paragraph, and a
// one-line summary (how many, the longest and where) to log.
func writeKernelWaits(log io.Writer, path string, waits []kernelWait) error {
	var b strings.Builder
	fmt.Fprintf(&b, "broker threads in uninterruptible sleep for %v or more (sampled every %v), longest first\n", minKernelWait, kernelWaitEvery)
	for _, kw := range waits {
		fmt.Fprintf(&b, "\n%s thread %d: %.1f ms from %s\n", kw.Process, kw.TID, float64(kw.Took)/1e6, kw.Began.Format("15:04:05.000"))
		for _, f := range kw.Stack {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if len(waits) == 0 {
		fmt.Fprintf(log, "kernel waits ≥ %v: none (%s)\n", minKernelWait, path)
		return nil
	}
	top := "?"
	if len(waits[0].Stack) > 0 {
		top = strings.Join(waits[0].Stack[:min(3, len(waits[0].Stack))], " < ")
	}
	fmt.Fprintf(log, "kernel waits ≥ %v: %d, longest %.1f ms on %s in %s (%s)\n", minKernelWait, len(waits),
		float64(waits[0].Took)/1e6, waits[0].Process, top, path)
	return nil
}

func procTasks(pid int) []int {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

func procThreadState(pid, tid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, err
	}
	return statState(string(b))
}

// statState is the state letter of a /proc stat line: the field after the
// command, which is in parentheses and may itself hold spaces and ')'.
func statState(stat string) (byte, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, fmt.Errorf("no state in %q", stat)
	}
	return stat[i+2], nil
}

func procThreadStack(pid, tid int) []string {
	base := fmt.Sprintf("/proc/%d/task/%d/", pid, tid)
	if b, err := os.ReadFile(base + "stack"); err == nil && len(b) > 0 {
		return stackFrames(string(b))
	}
	if b, err := os.ReadFile(base + "wchan"); err == nil && len(b) > 0 {
		return []string{string(b) + " (wchan; the kernel stack needs root)"}
	}
	return nil
}

// stackFrames turns /proc/<pid>/task/<tid>/stack ("[<0>] name+0x1b/0x40")
// into function names.
func stackFrames(s string) []string {
	var frames []string
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if i := strings.Index(line, "] "); i >= 0 {
			line = line[i+2:]
		}
		if i := strings.IndexByte(line, '+'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			frames = append(frames, line)
		}
	}
	return frames
}

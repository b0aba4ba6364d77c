package benchcmp

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The sleeper notices its process standing still: stopped with SIGSTOP
// for 400 ms by a shell, as a host that stops running the machine would,
// it reports waking at least that late; left alone, well under the limit.
func TestWatchPausesSeesTheProcessStopped(t *testing.T) {
	stop := watchPauses()
	time.Sleep(50 * time.Millisecond)
	if late := stop(); late >= machinePauseLimit {
		t.Fatalf("a sleeper left alone for 50 ms woke %v late", late)
	}
	stop = watchPauses()
	time.Sleep(3 * pauseTick)
	if out, err := exec.Command("sh", "-c", "kill -STOP $PPID; sleep 0.4; kill -CONT $PPID").CombinedOutput(); err != nil {
		t.Fatalf("stopping the test process: %v: %s", err, out)
	}
	time.Sleep(3 * pauseTick)
	if late := stop(); late < 350*time.Millisecond {
		t.Fatalf("stopped for 400 ms, the sleeper says it woke at worst %v late", late)
	}
}

// scriptedPauses makes watchPauses report the given lateness, one per
// watched run, in order (0 once they run out).
func scriptedPauses(t *testing.T, late ...time.Duration) {
	t.Helper()
	real := watchPauses
	t.Cleanup(func() { watchPauses = real })
	watchPauses = func() func() time.Duration {
		return func() time.Duration {
			if len(late) == 0 {
				return 0
			}
			d := late[0]
			late = late[1:]
			return d
		}
	}
}

// A run the machine paused in is done again and left out of the median;
// the figure counts it with its pause, and the report names it. The redos
// are bounded: a machine that pauses in every run still gives a figure.
func TestRunsTheMachinePausedInAreDoneAgain(t *testing.T) {
	shape := Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1, Records: 10, Runs: 3}
	scriptedPauses(t, 0, 1700*time.Millisecond, 100*time.Millisecond, 0)
	side := &seqSide{figs: []Figure{{MsgsPerSec: 2000}, {MsgsPerSec: 900}, {MsgsPerSec: 2100}, {MsgsPerSec: 2200}}}
	res := &Result{Rows: []Row{{Shape: shape}}}
	measureTidemark(t, res, side)
	f := res.Rows[0].Tidemark
	if side.runs != 4 || f.Redone != 1 || f.MachinePause != 1700*time.Millisecond {
		t.Fatalf("one paused run of 3: %d runs, figure %+v", side.runs, f)
	}
	if f.MsgsPerSec != 2100 || f.MinMsgsPerSec != 2000 || f.MaxMsgsPerSec != 2200 {
		t.Fatalf("the paused run (900/s) is in the figure: %+v", f)
	}
	md := res.Markdown()
	if !strings.Contains(md, "Runs done again because the machine paused") || !strings.Contains(md, "tidemark, sync, 1 producer, 128 B: 1 (paused up to 1700.00 ms)") {
		t.Fatalf("the report does not name the run done again:\n%s", md)
	}

	scriptedPauses(t, time.Second, time.Second, time.Second, time.Second, time.Second)
	always := &seqSide{figs: []Figure{{MsgsPerSec: 1000}}}
	res = &Result{Rows: []Row{{Shape: shape}}}
	measureTidemark(t, res, always)
	if f := res.Rows[0].Tidemark; always.runs != 3+pauseRedos || f.Redone != pauseRedos || f.MsgsPerSec != 1000 {
		t.Fatalf("every run paused: %d runs, figure %+v", always.runs, f)
	}

	scriptedPauses(t)
	res = &Result{Rows: []Row{{Shape: shape}}}
	measureTidemark(t, res, &seqSide{figs: []Figure{{MsgsPerSec: 1000}}})
	if md := res.Markdown(); !strings.Contains(md, "No run met a pause of the machine") {
		t.Fatalf("no pause, yet the report does not say so:\n%s", md)
	}
}

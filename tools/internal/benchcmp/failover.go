package benchcmp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FailoverFigure is what repeated kill -9s of the partition (stream) leader
// under a synchronous idempotent writer did to the writes.
type FailoverFigure struct {
	// Kills counts the leaders killed; Recoveries holds, per kill, the time
	// from the SIGKILL until the first write begun after the process died
	// was acknowledged.
	Kills      int             `json:"kills"`
	Recoveries []time.Duration `json:"recoveries_ns,omitempty"`
	Min        time.Duration   `json:"min_ns,omitempty"`
	Median     time.Duration   `json:"median_ns,omitempty"`
	Max        time.Duration   `json:"max_ns,omitempty"`
	// Acked and Failed count the writes acknowledged and those that
	// returned an error after the writer's retries.
	Acked  int64 `json:"acked"`
	Failed int64 `json:"failed"`
	// Lost counts acknowledged values missing from the log read back;
	// Duplicated counts values the log holds more than once.
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	// Err says why the run stopped early (the figures are what it got).
	Err string `json:"error,omitempty"`
}

// Failover is the failover figures of both systems.
type Failover struct {
	Tidemark  FailoverFigure `json:"tidemark"`
	JetStream FailoverFigure `json:"jetstream"`
}

// spread sets Min, Median and Max from Recoveries.
func (f *FailoverFigure) spread() {
	if len(f.Recoveries) == 0 {
		return
	}
	s := slices.Sorted(slices.Values(f.Recoveries))
	f.Min, f.Max = s[0], s[len(s)-1]
	if n := len(s); n%2 == 1 {
		f.Median = s[n/2]
	} else {
		f.Median = (s[n/2-1] + s[n/2]) / 2
	}
}

// countLog compares the acknowledged values with the log read back: lost
// are acknowledged values the log lacks, duplicated are values it holds
// more than once.
func countLog(acked, read []int64) (lost, duplicated int) {
	seen := make(map[int64]int, len(read))
	for _, v := range read {
		seen[v]++
	}
	for _, n := range seen {
		if n > 1 {
			duplicated++
		}
	}
	for _, v := range acked {
		if seen[v] == 0 {
			lost++
		}
	}
	return lost, duplicated
}

// failoverValueSize is the size of each value: the synchronous shapes'.
const failoverValueSize = 128

// failoverValue is value number seq: the number, padded to the size.
func failoverValue(seq int64) []byte {
	return fmt.Appendf(nil, "%-*d", failoverValueSize, seq)
}

// parseFailoverValue reads the number back out of a value.
func parseFailoverValue(b []byte) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// Failover bounds: one write's retries, one wait for a cluster state, and
// the whole run on one system.
const (
	writeRetryBound  = 30 * time.Second
	failoverStepWait = 90 * time.Second
)

func failoverBound(kills int) time.Duration { return 2*time.Minute + time.Duration(kills)*time.Minute }

// failoverTarget is one system under the failover run.
type failoverTarget interface {
	// write sends value seq and waits for its acknowledgement, retrying
	// (idempotently) for up to writeRetryBound.
	write(ctx context.Context, seq int64) error
	// settled reports nil once every replica is back in sync (full ISR,
	// or every stream peer current) and a leader is elected.
	settled(ctx context.Context) error
	// leader names the process leading the partition or stream.
	leader(ctx context.Context) (string, error)
	// kill sends SIGKILL to the named process and waits until it is gone.
	kill(name string) error
	// restart starts the named process again with its own flags.
	restart(name string) error
	// readBack returns every value the partition or stream holds.
	readBack(ctx context.Context) ([]int64, error)
}

// writer writes numbered values one after the other until stopped and
// signals the first acknowledgement of a write begun after a given time.
type writer struct {
	mu     sync.Mutex
	acked  []int64
	failed int64
	errs   map[string]int
	// after and recovered watch for the first write begun after a kill.
	after     time.Time
	recovered chan time.Time
}

func (w *writer) run(ctx context.Context, t failoverTarget, stop <-chan struct{}) {
	for seq := int64(0); ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		began := time.Now()
		err := t.write(ctx, seq)
		done := time.Now()
		w.mu.Lock()
		if err != nil {
			w.failed++
			w.errs[err.Error()]++
		} else {
			w.acked = append(w.acked, seq)
			if w.recovered != nil && began.After(w.after) {
				w.recovered <- done
				w.recovered = nil
			}
		}
		w.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// watch arms the recovery signal for writes begun after t.
func (w *writer) watch(t time.Time) <-chan time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.after, w.recovered = t, make(chan time.Time, 1)
	return w.recovered
}

// poll calls check every 100 ms until it returns nil or wait passes.
func poll(ctx context.Context, wait time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %w", what, wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runFailover kills the leader kills times under a running writer: each
// time it waits for a settled cluster and flowing writes, kills the leader,
// waits for the first acknowledged write begun after the process died,
// and restarts the process. Then it reads the log back and counts.
func runFailover(ctx context.Context, out io.Writer, name string, t failoverTarget, kills int) FailoverFigure {
	ctx, cancel := context.WithTimeout(ctx, failoverBound(kills))
	defer cancel()
	var f FailoverFigure
	w := &writer{errs: map[string]int{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, t, stop) }()
	err := killLoop(ctx, out, name, t, w, kills, &f)
	if err == nil {
		// The last restarted process back in sync before the count.
		err = poll(ctx, failoverStepWait, "replicas in sync after the last kill", func() error { return t.settled(ctx) })
	}
	close(stop)
	<-done
	w.mu.Lock()
	f.Acked, f.Failed = int64(len(w.acked)), w.failed
	for e, n := range w.errs {
		fmt.Fprintf(out, "%s  failover: %d writes failed: %s\n", name, n, e)
	}
	w.mu.Unlock()
	f.spread()
	if err != nil {
		f.Err = err.Error()
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer rcancel()
	read, rerr := t.readBack(rctx)
	if rerr != nil {
		f.Err = errors.Join(err, fmt.Errorf("reading back: %w", rerr)).Error()
		return f
	}
	f.Lost, f.Duplicated = countLog(w.acked, read)
	return f
}

func killLoop(ctx context.Context, out io.Writer, name string, t failoverTarget, w *writer, kills int, f *FailoverFigure) error {
	for i := range kills {
		if err := poll(ctx, failoverStepWait, "replicas in sync", func() error { return t.settled(ctx) }); err != nil {
			return err
		}
		n0 := w.count()
		if err := poll(ctx, failoverStepWait, "writes flowing", func() error {
			if n := w.count(); n < n0+50 {
				return fmt.Errorf("%d writes acknowledged since in sync", n-n0)
			}
			return nil
		}); err != nil {
			return err
		}
		leader, err := t.leader(ctx)
		if err != nil {
			return err
		}
		killed := time.Now()
		if err := t.kill(leader); err != nil {
			return err
		}
		// Only a write begun after the process is gone proves a new leader.
		recovered := w.watch(time.Now())
		select {
		case at := <-recovered:
			f.Recoveries = append(f.Recoveries, at.Sub(killed))
			fmt.Fprintf(out, "%s  failover %d/%d: killed %s, writes acknowledged again after %s\n", name, i+1, kills, leader, ms(at.Sub(killed)))
		case <-time.After(failoverStepWait):
			f.Kills++
			return fmt.Errorf("kill %d: no write acknowledged within %v after killing %s", i+1, failoverStepWait, leader)
		case <-ctx.Done():
			f.Kills++
			return ctx.Err()
		}
		f.Kills++
		if err := t.restart(leader); err != nil {
			return err
		}
	}
	return nil
}

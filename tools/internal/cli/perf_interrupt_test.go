package cli_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// cancelOnWrite is an output that cancels the command's context once the
// command wrote what it looks for: Ctrl-C in the middle of a run.
type cancelOnWrite struct {
	mu     sync.Mutex
	b      strings.Builder
	look   string
	cancel context.CancelFunc
	fired  bool
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if !w.fired && strings.Contains(w.b.String(), w.look) {
		w.fired = true
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// An interrupted perf run prints its summary and says it was interrupted,
// after how long and with how much done, rather than blaming --timeout.
func TestPerfInterruptedSaysSo(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "paced", "--partitions", "1", "--replication-factor", "3").ok(t)
	for _, args := range [][]string{
		{"perf", "produce", "--topic", "paced", "--num-records", "100000", "--record-size", "10", "--throughput", "50"},
		{"perf", "consume", "--topic", "paced", "--messages", "100000"},
	} {
		ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
		ctx, cancel := context.WithCancel(ctx)
		out := &cancelOnWrite{look: "records ", cancel: cancel}
		var errb strings.Builder
		code := cli.Run(ctx, append(append(args, "--reporting-interval", "100ms"), c.flags...),
			cli.Streams{In: strings.NewReader(""), Out: out, Err: &errb, Getenv: func(string) string { return "" }})
		stop()
		if !out.fired {
			t.Fatalf("%v: no progress line before the run ended:\n%s\n%s", args, out.String(), errb.String())
		}
		if code != cli.ExitFailed || !strings.Contains(errb.String(), "interrupted after") || strings.Contains(errb.String(), "--timeout") {
			t.Fatalf("%v: exit %d, stderr %q: want 1 saying it was interrupted, not --timeout", args, code, errb.String())
		}
		if !strings.Contains(out.String(), "p99.9") {
			t.Fatalf("%v: no summary after the interrupt:\n%s", args, out.String())
		}
	}
}

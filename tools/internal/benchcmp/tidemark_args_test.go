package benchcmp

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// With a trace folder, every paced run's perf e2e writes its own execution
// trace there, numbered by the shape's runs; without, none is asked for.
// (The brokers' traces of the same run: TestTraceProcessesWritesEachOnesTrace.)
func TestPacedRunsWriteAnExecutionTraceEach(t *testing.T) {
	s := Shape{Name: "paced-128", Mode: Paced, Size: 128, Producers: 1, Records: 1000, Rate: 500, Warmup: 1}
	plain := &tidemarkSide{}
	if args := plain.pacedArgs(s, plain.nextTrace(s)); slices.Contains(args, "--exec-trace") {
		t.Fatalf("no trace folder, yet %v", args)
	}
	// The folder for the kernel waits alone asks the client for no trace.
	waitsOnly := &tidemarkSide{traceDir: t.TempDir(), kernelWaits: true}
	if trace := waitsOnly.nextTrace(s); trace == "" || slices.Contains(waitsOnly.pacedArgs(s, trace), "--exec-trace") {
		t.Fatalf("kernel waits only: run name %q, args %v", trace, waitsOnly.pacedArgs(s, trace))
	}
	dir := t.TempDir()
	ts := &tidemarkSide{traceDir: dir, execTrace: true}
	traceOf := func(args []string) string {
		i := slices.Index(args, "--exec-trace")
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("no --exec-trace in %v", args)
		}
		return args[i+1]
	}
	first, second := traceOf(ts.pacedArgs(s, ts.nextTrace(s))), traceOf(ts.pacedArgs(s, ts.nextTrace(s), "--cpu-profile", "x"))
	k := Shape{Name: "paced-1k", Mode: Paced, Size: 1024, Records: 10, Rate: 5, Warmup: 1}
	other := traceOf(ts.pacedArgs(k, ts.nextTrace(k)))
	for _, c := range []struct{ got, want string }{
		{first, filepath.Join(dir, "tidemark-paced-128-run1.trace")},
		{second, filepath.Join(dir, "tidemark-paced-128-run2.trace")},
		{other, filepath.Join(dir, "tidemark-paced-1k-run1.trace")},
	} {
		if c.got != c.want {
			t.Errorf("trace file %s, want %s", c.got, c.want)
		}
	}
	if args := ts.pacedArgs(s, ts.nextTrace(s), "--cpu-profile", "x"); !slices.Equal(args[len(args)-2:], []string{"--cpu-profile", "x"}) {
		t.Errorf("the extra flags must come last: %v", args)
	}
}

// Each process serving /debug/pprof/ gets its own trace file of the run,
// a Go execution trace (this test process traces itself through the real
// handler); one that does not answer is said in the log and the others are
// still written.
func TestTraceProcessesWritesEachOnesTrace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	base := filepath.Join(t.TempDir(), "tidemark-paced-128-run1")
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	traceProcesses(ctx, &log, base, 1, []tracedProcess{{"broker-1", ln.Addr().String()}, {"broker-2", deadAddr}})()
	b, err := os.ReadFile(base + "-broker-1.trace")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:16], []byte(" trace")) {
		t.Fatalf("broker-1's file is not an execution trace: %q", b[:min(len(b), 16)])
	}
	if _, err := os.Stat(base + "-broker-2.trace"); err == nil {
		t.Error("a trace file for a process that did not answer")
	}
	if !strings.Contains(log.String(), "tracing broker-2: ") {
		t.Errorf("the failed trace is not said: %q", log.String())
	}
}

package benchcmp

import (
	"path/filepath"
	"slices"
	"testing"
)

// With a trace folder, every paced run's perf e2e writes its own execution
// trace there, numbered by the shape's runs; without, none is asked for.
func TestPacedRunsWriteAnExecutionTraceEach(t *testing.T) {
	s := Shape{Name: "paced-128", Mode: Paced, Size: 128, Producers: 1, Records: 1000, Rate: 500, Warmup: 1}
	plain := &tidemarkSide{}
	if args := plain.pacedArgs(s); slices.Contains(args, "--exec-trace") {
		t.Fatalf("no trace folder, yet %v", args)
	}
	dir := t.TempDir()
	ts := &tidemarkSide{traceDir: dir}
	traceOf := func(args []string) string {
		i := slices.Index(args, "--exec-trace")
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("no --exec-trace in %v", args)
		}
		return args[i+1]
	}
	first, second := traceOf(ts.pacedArgs(s)), traceOf(ts.pacedArgs(s, "--cpu-profile", "x"))
	other := traceOf(ts.pacedArgs(Shape{Name: "paced-1k", Mode: Paced, Size: 1024, Records: 10, Rate: 5, Warmup: 1}))
	for _, c := range []struct{ got, want string }{
		{first, filepath.Join(dir, "tidemark-paced-128-run1.trace")},
		{second, filepath.Join(dir, "tidemark-paced-128-run2.trace")},
		{other, filepath.Join(dir, "tidemark-paced-1k-run1.trace")},
	} {
		if c.got != c.want {
			t.Errorf("trace file %s, want %s", c.got, c.want)
		}
	}
	if args := ts.pacedArgs(s, "--cpu-profile", "x"); !slices.Equal(args[len(args)-2:], []string{"--cpu-profile", "x"}) {
		t.Errorf("the extra flags must come last: %v", args)
	}
}

package benchcmp

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// cpusAllowed is a process's Cpus_allowed_list from its status text.
func cpusAllowed(t *testing.T, status string) string {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list in %q", status)
	return ""
}

func TestStartOnCPUConfinesOnlyThatChild(t *testing.T) {
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	all := cpusAllowed(t, string(self))

	var out strings.Builder
	cmd := exec.Command("cat", "/proc/self/status")
	cmd.Stdout = &out
	if err := startOnCPU(cmd, 0); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := cpusAllowed(t, out.String()); got != "0" {
		t.Fatalf("child started on CPU 0 may run on %q", got)
	}
	// The thread that forked it is gone: children started afterwards, from
	// whichever thread, keep every CPU the test process has.
	for range 20 {
		b, err := exec.Command("cat", "/proc/self/status").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := cpusAllowed(t, string(b)); got != all {
			t.Fatalf("a later child may run on %q, the test process on %q", got, all)
		}
	}
	if err := startOnCPU(exec.Command("true"), 1<<20); err == nil || !strings.Contains(err.Error(), "CPU 1048576") {
		t.Fatalf("a CPU that does not exist: got %v", err)
	}
}

func TestOneCPUNoteSetsItBesideTheMainRows(t *testing.T) {
	ms := time.Millisecond
	sync1 := Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1}
	r := &Result{Machine: "2 × test CPU, linux/amd64", Rows: []Row{
		{Shape: sync1, Tidemark: Figure{MsgsPerSec: 2000, P99: ms}, JetStream: Figure{MsgsPerSec: 2000, P99: ms}},
	}, OneCPU: &OneCPU{CPU: 0, Rows: []Row{
		{Shape: sync1, Tidemark: Figure{MsgsPerSec: 4000, P99: ms}, JetStream: Figure{MsgsPerSec: 1600, P99: 2 * ms}},
	}, LinkFloor: &LinkFloor{}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	md := back.Markdown()
	requireLines(t, md,
		"| synchronous shapes, every process of both systems on CPU 0 only | tidemark msgs/s | JetStream msgs/s | ratio | p99 ratio | ratio with 2 CPUs (above) |",
		"| sync, 1 producer, 128 B | 4000 | 1600 | 2.50 | 0.50 | 1.00 |",
		"The targets above are judged on the main rows only",
	)
	// The targets table still judges the main run's 1.00×.
	requireLines(t, md, "| sync, 1 producer, 128 B: ≥ 2× JetStream's writes/s, p99 ≤ JetStream's | 1.00×, p99 1.00× | not met |")

	r.OneCPU = &OneCPU{Err: "exit status 1: nats-server not found"}
	requireLines(t, r.Markdown(), "with every process on one CPU, and did not: exit status 1: nats-server not found.")
	if got := cpusOf("no count here"); got != "every CPU" {
		t.Errorf("cpusOf: %q", got)
	}
}

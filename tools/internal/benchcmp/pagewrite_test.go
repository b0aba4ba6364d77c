package benchcmp

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The measurement writes into new pages, then over them, prices both per
// KiB from the thread's CPU, and leaves no file behind.
func TestMeasurePageWrite(t *testing.T) {
	dir := t.TempDir()
	pw, err := measurePageWrite(dir, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if pw.Fresh < 0 || pw.Cached < 0 || pw.Fresh+pw.Cached <= 0 {
		t.Fatalf("writing 4 MiB twice cost no CPU: %+v", pw)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the measurement left %d files in %s", len(left), dir)
	}
	if _, err := measurePageWrite(dir, 100); err == nil || !strings.Contains(err.Error(), "below one write") {
		t.Fatalf("a size below one write: %v", err)
	}
	if _, err := measurePageWrite(dir+"/missing", 4<<20); err == nil {
		t.Fatal("a directory that does not exist measured nothing and said nothing")
	}
}

// The CPU table's notes price a replica's append from the measurement and
// set it beside the brokers' share of the paced 1 KiB row; without a
// measurement they say nothing of it.
func TestCPUTableNotesPriceTheAppends(t *testing.T) {
	r := &Result{Rows: []Row{
		{Shape: Shape{Name: "paced-1k", Mode: Paced, Size: 1024, Fraction: 0.5},
			Tidemark:  Figure{MsgsPerSec: 100, ServerCPU: 26 * time.Microsecond, ClientCPU: 10 * time.Microsecond},
			JetStream: Figure{MsgsPerSec: 100, ServerCPU: 90 * time.Microsecond}},
	}}
	if md := r.Markdown(); strings.Contains(md, "Appends:") {
		t.Fatalf("no page write was measured, yet one is priced:\n%s", md)
	}
	r.PageWrite = PageWrite{Fresh: 3100 * time.Nanosecond, Cached: 150 * time.Nanosecond}
	md := r.Markdown()
	for _, want := range []string{
		"writing a file cost 3.10 µs of CPU per KiB into pages the page cache did not hold and 0.15 µs into pages it held (1024 MiB in writes of 64 KiB",
		"cost about 9.3 µs of servers' CPU (the brokers' whole share in the paced 1 KiB row: 26 µs).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
}

package benchcmp

import (
	"strings"
	"testing"
	"time"
)

func TestMarkdownRowAndRatios(t *testing.T) {
	r := &Result{Started: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC), Machine: "2 × test CPU", Rows: []Row{
		{Shape: Shape{Mode: Sync, Size: 1024, Producers: 1},
			Tidemark:  Figure{MsgsPerSec: 2000, P50: time.Millisecond, P99: 2 * time.Millisecond},
			JetStream: Figure{MsgsPerSec: 1000, P50: time.Millisecond, P99: 4 * time.Millisecond}},
		{Shape: Shape{Mode: Batch, Size: 128, Producers: 1},
			Tidemark: Figure{Err: "exit status 1"}, JetStream: Figure{MsgsPerSec: 30000}},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"Measured 2026-12-01 07:00 UTC on 2 × test CPU",
		"| sync, 1 producer, 1 KiB | 2000 | 1000 | 2.00 | 1.95 | 0.98 | 1.00 ms / 2.00 ms | 1.00 ms / 4.00 ms | 0.50 |",
		"| batching producer, 128 B | error | 30000 | – | – | 3.66 | – | – | – |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

func TestMarkdownGivesTheAcksRatioAndPeakRSS(t *testing.T) {
	r := &Result{Rows: []Row{
		{Shape: Shape{Name: "batch-1k", Mode: Batch, Size: 1024}, Tidemark: Figure{MsgsPerSec: 6000}, JetStream: Figure{MsgsPerSec: 5000}},
		{Shape: Shape{Name: "batch-1k-acks1", Mode: Batch, Size: 1024, LeaderAcks: true}, Tidemark: Figure{MsgsPerSec: 8000}},
	}, PeakRSS: PeakRSS{Tidemark: 47e6, JetStream: 535e6}}
	md := r.Markdown()
	for _, want := range []string{
		"| batching producer, 1 KiB, acks=1 | 8000 | – | – |",
		"acks=all / acks=1 throughput, batching 1 KiB: 0.75",
		"tidemark 47 MB, JetStream 535 MB",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

func TestSpliceReplacesOnlyTheBlock(t *testing.T) {
	readme := "# x\n\nbefore\n" + readmeBegin + "\nold table\n" + readmeEnd + "\nafter\n"
	got, err := Splice(readme, "| new |\n\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# x\n\nbefore\n" + readmeBegin + "\n| new |\n" + readmeEnd + "\nafter\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := Splice("# no markers\n", "| new |"); err == nil || err.Error() != "no "+readmeBegin+" ... "+readmeEnd+" block" {
		t.Fatalf("got %v", err)
	}
}

func TestMarkdownSaysBothSystemsWindowAndSecurity(t *testing.T) {
	rows := []Row{{Shape: Shape{Name: "batch-1k", Mode: Batch, Size: 1024, InFlight: 256 << 10}}}
	md := (&Result{Rows: rows}).Markdown()
	for _, want := range []string{"buffer.memory 256 KiB", "`--batch` 256 KiB / record size", "mutual TLS on every link", "mutual TLS on client connections and routes"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	md = (&Result{Rows: rows, Plaintext: true}).Markdown()
	if strings.Count(md, "no TLS (--plaintext)") != 2 || strings.Contains(md, "mutual TLS") {
		t.Errorf("a plaintext run must say so for both systems:\n%s", md)
	}
}

// requireLines fails t for each wanted line md does not hold.
func requireLines(t *testing.T, md string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(md, w) {
			t.Errorf("table lacks %q:\n%s", w, md)
		}
	}
}

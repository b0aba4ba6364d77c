package benchcmp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDropPageCacheWritesOne(t *testing.T) {
	knob := filepath.Join(t.TempDir(), "drop_caches")
	if err := os.WriteFile(knob, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := dropPageCache(knob); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(knob); string(b) != "1" {
		t.Fatalf("wrote %q, want \"1\" (drop clean page-cache pages only)", b)
	}
	if err := dropPageCache(filepath.Join(t.TempDir(), "no", "such", "knob")); err == nil {
		t.Fatal("a knob that is not there must be an error")
	}
}

func TestMarkdownSaysWhenThePageCacheWasDropped(t *testing.T) {
	rows := []Row{{Shape: Shape{Name: "batch-1k", Mode: Batch, Size: 1024}}}
	const said = "it drops the clean page cache (`/proc/sys/vm/drop_caches`)"
	if md := (&Result{Rows: rows, DropsPageCache: true}).Markdown(); !strings.Contains(md, said) {
		t.Errorf("a run that dropped the cache must say so:\n%s", md)
	}
	if md := (&Result{Rows: rows}).Markdown(); strings.Contains(md, said) {
		t.Errorf("a run that could not drop the cache must not claim it:\n%s", md)
	}
}

func TestNoDropBetweenAConsumerAndTheShapeItReads(t *testing.T) {
	var rows []Row
	for _, s := range DefaultShapes(1, DefaultInFlight) {
		rows = append(rows, Row{Shape: s})
	}
	var kept []string
	for i, r := range rows {
		if !dropsBefore(rows, i) {
			kept = append(kept, r.Shape.Name)
		}
	}
	// consume-1k reads batch-1k: the cache stays from batch-1k's end until
	// the consumer has run.
	if got := strings.Join(kept, ","); got != "batch-1k-acks1,consume-1k" {
		t.Fatalf("cache kept before %q, want batch-1k-acks1,consume-1k", got)
	}
	if !dropsBefore(rows, 0) || !dropsBefore(rows, len(rows)-1) {
		t.Fatal("the first and last shapes start with the cache dropped")
	}
}

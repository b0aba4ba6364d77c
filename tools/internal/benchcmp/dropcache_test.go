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

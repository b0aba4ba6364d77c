package logstore

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"tidemark.io/services/recordbatch"
)

// Compaction of compressed batches: the cleaner decompresses to pick the
// records to keep and writes each cleaned batch back in its own codec; the
// key state is unchanged and every batch still validates.
func TestCleanCompressedBatchesKeepTheirCodec(t *testing.T) {
	mem, clk := newMem(t), newClock()
	l := openLog(t, mem, compactConfig(), clk)
	codecs := []recordbatch.Codec{recordbatch.Gzip, recordbatch.Snappy, recordbatch.LZ4, recordbatch.Zstd}
	for i := range 40 {
		var recs []kv
		for _, k := range []string{"a", "b", "c"} {
			recs = append(recs, kv{k, val(fmt.Sprintf("%s-%d-%s", k, i, strings.Repeat("x", 40)))})
		}
		batch, err := recordbatch.Batch(kvBatch(clk.Now().UnixMilli(), recs...)).Compressed(codecs[i%len(codecs)])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(batch, 0); err != nil {
			t.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	before := readRecords(t, l)
	res := mustClean(t, l, leo)
	if res.RecordsRemoved == 0 {
		t.Fatalf("nothing compacted: %+v", res)
	}
	after := readRecords(t, l)
	if !maps.Equal(state(before), state(after)) || len(after) >= len(before) {
		t.Fatalf("state %v -> %v (%d -> %d records)", state(before), state(after), len(before), len(after))
	}
	seen := map[recordbatch.Codec]bool{}
	rr, err := l.Read(l.LogStartOffset(), 1<<20, leo)
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range recordbatch.All(rr.Records) {
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ValidateStored(); err != nil {
			t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
		}
		seen[b.Codec()] = true
	}
	if seen[recordbatch.None] || len(seen) == 0 {
		t.Fatalf("codecs after cleaning %v: a cleaned batch lost its compression", seen)
	}
}

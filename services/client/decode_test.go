package client

import (
	"testing"

	"tidemark.io/services/recordbatch"
)

// fetchedBatches is what a fetch returns: batches of records, back to back.
func fetchedBatches(t testing.TB, batches, perBatch int) []byte {
	t.Helper()
	var out []byte
	off := int64(0)
	for range batches {
		var b recordbatch.Builder
		for i := range perBatch {
			b.Append(recordbatch.Record{Timestamp: 1000 + int64(i), Value: make([]byte, 128)})
		}
		batch := b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
		batch.SetBaseOffset(off)
		off = batch.NextOffset()
		out = append(out, batch...)
	}
	return out
}

// Decoding a fetch allocates the records' slice once, at its final size:
// grown record by record it was the consumer's largest allocation.
func TestDecodeRecordsAllocatesTheRecordsOnce(t *testing.T) {
	buf := fetchedBatches(t, 4, 500)
	recs, next, _, err := decodeRecords("t", 0, buf, 250)
	if err != nil || next != 2000 || len(recs) != 1750 || recs[0].Offset != 250 || recs[1749].Offset != 1999 || len(recs[5].Value) != 128 {
		t.Fatalf("decoded %d records, next %d, err %v", len(recs), next, err)
	}
	if cap(recs) < len(recs) || cap(recs) > 2000 {
		t.Fatalf("room for %d records, decoded %d", cap(recs), len(recs))
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, _, err := decodeRecords("t", 0, buf, 250); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("decoding 4 batches allocated %.0f times; want the records' slice only", allocs)
	}
}

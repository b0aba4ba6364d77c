package recordbatch

import (
	"bytes"
	"testing"
)

// FuzzDecodeBatch feeds arbitrary bytes to the decoder. It must never panic,
// and a batch that validates must decode to records that, rebuilt, validate
// and decode to the same records.
func FuzzDecodeBatch(f *testing.F) {
	var bl Builder
	for _, r := range sampleRecords()[:3] {
		bl.Append(r)
	}
	f.Add([]byte(bl.Build(3, 1, 7)))
	bl.Reset()
	bl.Append(Record{Timestamp: 5, Key: []byte("k"), Value: []byte("v")})
	f.Add([]byte(bl.Build(NoProducerID, NoProducerEpoch, NoSequence)))
	f.Add(make([]byte, HeaderSize))

	f.Fuzz(func(t *testing.T, data []byte) {
		for b := range All(data) {
			_ = b
		}
		_, _ = ValidPrefix(data)
		b := Batch(data)
		err := b.Validate()
		var recs []Record
		for r, rerr := range b.Records() {
			if rerr != nil {
				if err == nil {
					t.Fatalf("Validate passed but Records failed: %v", rerr)
				}
				break
			}
			recs = append(recs, r)
		}
		if err != nil {
			return
		}
		if len(recs) != int(b.RecordCount()) {
			t.Fatalf("decoded %d records, header says %d", len(recs), b.RecordCount())
		}
		want := Summary{MinTimestamp: b.MinTimestamp(), Keyless: -1}
		for i, r := range recs {
			want.Headers += int64(len(r.Headers))
			if r.Key == nil && want.Keyless < 0 {
				want.Keyless = int32(i)
			}
		}
		if sum, _ := b.ValidateSummary(); sum != want {
			t.Fatalf("summary %+v, the records say %+v", sum, want)
		}
		var rb Builder
		for _, r := range recs {
			rb.Append(r)
		}
		again := rb.Build(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
		again.SetBaseOffset(b.BaseOffset())
		if verr := again.Validate(); verr != nil {
			t.Fatalf("rebuilt batch invalid: %v", verr)
		}
		i := 0
		for r := range again.Records() {
			w := recs[i]
			if r.Offset != w.Offset || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) ||
				(r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Value, w.Value) ||
				(r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
				t.Fatalf("record %d differs after rebuild", i)
			}
			i++
		}
	})
}

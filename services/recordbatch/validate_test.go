package recordbatch

import "testing"

// ValidateSummary answers what a decode of every record would: the produce
// path trusts it for the header bound, the timestamp bounds and the keys of
// a compacted topic without decompressing the batch again.
func TestValidateSummaryMatchesTheRecords(t *testing.T) {
	recs := sampleRecords() // record 1 has a null key, record 2 two headers
	recs = append(recs, Record{Timestamp: 980, Key: []byte("k"), Headers: make([]Header, 3)})
	plain := build(t, recs, -1, -1, -1)
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			b := plain
			if c != None {
				var err error
				if b, err = plain.Compressed(c); err != nil {
					t.Fatal(err)
				}
			}
			sum, err := b.ValidateSummary()
			if err != nil {
				t.Fatal(err)
			}
			want := Summary{Headers: 5, MinTimestamp: b.MinTimestamp(), Keyless: 1}
			if sum != want || want.MinTimestamp != 980 {
				t.Fatalf("summary %+v, want %+v (min timestamp 980)", sum, want)
			}
		})
	}
	keyed := build(t, []Record{{Timestamp: 5, Key: []byte{}}, {Timestamp: 6, Key: []byte("k")}}, -1, -1, -1)
	if sum, err := keyed.ValidateSummary(); err != nil || sum.Keyless != -1 || sum.Headers != 0 {
		t.Fatalf("keyed batch: %+v, %v; want no keyless record and no header", sum, err)
	}
	broken := append(Batch(nil), plain...)
	broken[len(broken)-1] ^= 0xff
	if sum, err := broken.ValidateSummary(); err == nil || sum != (Summary{}) {
		t.Fatalf("damaged batch: %+v, %v; want the zero summary and an error", sum, err)
	}
}

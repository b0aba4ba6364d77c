package recordbatch

import (
	"math/rand/v2"
	"testing"
)

// benchBatch is 100 records of 1 KiB each, compressed with c: values drawn
// from a small alphabet, so they compress about as text does.
func benchBatch(b *testing.B, c Codec) Batch {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var bl Builder
	for i := range 100 {
		v := make([]byte, 1024)
		for j := range v {
			v[j] = "abcdefghijklmnop"[rng.IntN(16)]
		}
		bl.Append(Record{Timestamp: 1000 + int64(i), Key: []byte{byte(i)}, Value: v,
			Headers: []Header{{Key: "h", Value: []byte("x")}}})
	}
	z, err := bl.Build(NoProducerID, NoProducerEpoch, NoSequence).Compressed(c)
	if err != nil {
		b.Fatal(err)
	}
	return z
}

// BenchmarkValidateCompressed measures what a produce does with a
// compressed batch before appending it: validate it and count its records'
// headers (one decompression).
func BenchmarkValidateCompressed(b *testing.B) {
	for _, c := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		b.Run(c.String(), func(b *testing.B) {
			batch := benchBatch(b, c)
			b.ReportAllocs()
			b.SetBytes(100 * 1024)
			for b.Loop() {
				sum, err := batch.ValidateSummary()
				if err != nil {
					b.Fatal(err)
				}
				if sum.Headers != 100 {
					b.Fatal("headers miscounted")
				}
			}
		})
	}
}

package recordbatch

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"

	"tidemark.io/services/platform/kerr"
)

func values(t *testing.T, b Batch) []string {
	t.Helper()
	var out []string
	for r, err := range b.Records() {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(r.Value))
	}
	return out
}

// Every codec a Kafka producer uses is validated by decompressing, read
// back record by record, and compacted into a batch of the same codec.
func TestCompressedBatchesValidateDecodeAndRetain(t *testing.T) {
	plain := build(t, sampleRecords(), 7, 0, 0)
	want := values(t, plain)
	for _, c := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			b, err := plain.Compressed(c)
			if err != nil {
				t.Fatal(err)
			}
			if b.Codec() != c || bytes.Equal(b[HeaderSize:], plain[HeaderSize:]) {
				t.Fatalf("codec %s, records unchanged: not compressed", b.Codec())
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if err := b.ValidateStored(); err != nil {
				t.Fatalf("ValidateStored: %v", err)
			}
			if got := values(t, b); !slices.Equal(got, want) {
				t.Fatalf("records %q, want %q", got, want)
			}
			if b.MinTimestamp() != plain.MinTimestamp() {
				t.Fatalf("min timestamp %d, want %d", b.MinTimestamp(), plain.MinTimestamp())
			}
			kept, n, err := b.Retain(nil, false, func(r Record) bool { return r.Offset%2 == 1 })
			if err != nil || n == 0 {
				t.Fatalf("Retain: %d kept, %v", n, err)
			}
			kb := Batch(kept)
			if kb.Codec() != c {
				t.Fatalf("retained batch has codec %s, want %s", kb.Codec(), c)
			}
			if err := kb.ValidateStored(); err != nil {
				t.Fatalf("retained batch: %v", err)
			}
			var odd []string
			for i, v := range want {
				if i%2 == 1 {
					odd = append(odd, v)
				}
			}
			if got := values(t, kb); !slices.Equal(got, odd) {
				t.Fatalf("retained %q, want %q", got, odd)
			}
		})
	}
}

// The Java client frames snappy the xerial way (a magic header, then
// length-prefixed blocks); other clients send one raw block. Both decode.
func TestSnappyXerialFraming(t *testing.T) {
	plain := build(t, sampleRecords(), -1, -1, -1)
	recs := []byte(plain[HeaderSize:])
	half := len(recs) / 2
	framed := append([]byte{}, xerialMagic...)
	framed = binary.BigEndian.AppendUint32(framed, 1) // version
	framed = binary.BigEndian.AppendUint32(framed, 1) // compatible version
	for _, part := range [][]byte{recs[:half], recs[half:]} {
		blk := snappy.Encode(nil, part)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(blk)))
		framed = append(framed, blk...)
	}
	b := append(append([]byte{}, plain[:HeaderSize]...), framed...)
	be.PutUint16(b[offAttributes:], uint16(Snappy))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-LengthOverhead))
	fixCRC(b)
	if err := Validate(b); err != nil {
		t.Fatal(err)
	}
	if got, want := values(t, b), values(t, plain); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Damaged compressed data is CORRUPT_MESSAGE, never a panic.
func TestDamagedCompressedRecordsAreCorrupt(t *testing.T) {
	plain := build(t, sampleRecords(), -1, -1, -1)
	for _, c := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		b, err := plain.Compressed(c)
		if err != nil {
			t.Fatal(err)
		}
		for i := HeaderSize; i < len(b); i += max(1, (len(b)-HeaderSize)/16) {
			d := slices.Clone(b)
			d[i] ^= 0xff
			fixCRC(d)
			if err := Validate(d); err != nil && kerr.CodeOf(err) != kerr.CorruptMessage && kerr.CodeOf(err) != kerr.InvalidRecord {
				t.Fatalf("%s, byte %d flipped: %v", c, i, err)
			}
		}
	}
}

// A batch whose records decompress beyond the bound is refused, whatever
// the codec, before it grows further (a small hostile batch cannot use up
// memory).
func TestDecompressionIsBounded(t *testing.T) {
	plain := build(t, sampleRecords(), -1, -1, -1) // about 70 KB of records
	defer func(m int) { maxDecompressed = m }(maxDecompressed)
	maxDecompressed = 16 << 10
	for _, c := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		b, err := plain.Compressed(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(b); kerr.CodeOf(err) != kerr.CorruptMessage || !strings.Contains(err.Error(), "exceed") {
			t.Fatalf("%s: %v, want CORRUPT_MESSAGE for records beyond the bound", c, err)
		}
	}
}

package recordbatch

import (
	"encoding/binary"
	"runtime"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func allocatedDuring(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// withRecords returns a copy of the header of plain with records as its
// records section, codec c, and length and CRC fixed.
func withRecords(plain Batch, c Codec, records []byte) Batch {
	b := append(append([]byte{}, plain[:HeaderSize]...), records...)
	be.PutUint16(b[offAttributes:], uint16(plain.Attributes())&^compressionMask|uint16(c))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-LengthOverhead))
	fixCRC(b)
	return b
}

// A snappy block starts with its decoded length; a few bytes claiming 200 MiB
// must not make the broker allocate 200 MiB before finding the block bogus.
func TestSnappyDeclaredLengthIsNotTrusted(t *testing.T) {
	plain := build(t, []Record{{Timestamp: 1, Value: []byte("v")}}, -1, -1, -1)
	block := binary.AppendUvarint(nil, 200<<20)
	block = append(block, 0x00, 'x') // one literal byte, then nothing
	xerial := append([]byte{}, xerialMagic...)
	xerial = binary.BigEndian.AppendUint32(xerial, 1)
	xerial = binary.BigEndian.AppendUint32(xerial, 1)
	xerial = binary.BigEndian.AppendUint32(xerial, uint32(len(block)))
	xerial = append(xerial, block...)
	for name, recs := range map[string][]byte{"raw block": block, "xerial": xerial} {
		b := withRecords(plain, Snappy, recs)
		var err error
		used := allocatedDuring(func() { err = b.Validate() })
		t.Logf("%s: %d-byte batch, Validate allocated %d bytes: %v", name, len(b), used, err)
		if kerr.CodeOf(err) != kerr.CorruptMessage {
			t.Fatalf("%s: %v, want CORRUPT_MESSAGE", name, err)
		}
		if used > 1<<20 {
			t.Errorf("%s: a %d-byte batch made Validate allocate %d bytes", name, len(b), used)
		}
	}
}

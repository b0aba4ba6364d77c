package recordbatch

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"testing"

	"tidemark.io/services/platform/kerr"
)

// sampleRecords covers null and empty keys and values, headers with null
// values, and timestamps that go backwards within a batch.
func sampleRecords() []Record {
	return []Record{
		{Timestamp: 1000, Key: []byte("k0"), Value: []byte("v0")},
		{Timestamp: 990, Key: nil, Value: []byte{}},
		{Timestamp: 1500, Key: []byte{}, Value: nil, Headers: []Header{{Key: "h", Value: []byte("x")}, {Key: "", Value: nil}}},
		{Timestamp: 1200, Key: bytes.Repeat([]byte("k"), 300), Value: bytes.Repeat([]byte("v"), 70000)},
	}
}

func build(t testing.TB, recs []Record, pid int64, epoch int16, seq int32) Batch {
	t.Helper()
	var b Builder
	for _, r := range recs {
		b.Append(r)
	}
	if b.Count() != len(recs) {
		t.Fatalf("Count = %d, want %d", b.Count(), len(recs))
	}
	out := b.Build(pid, epoch, seq)
	if b.Len() != len(out) {
		t.Fatalf("Len = %d, batch is %d bytes", b.Len(), len(out))
	}
	return bytes.Clone(out)
}

// fixCRC recomputes the CRC after a test edits covered bytes on purpose.
func fixCRC(b Batch) {
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

func TestBuildDecodeRoundTrip(t *testing.T) {
	recs := sampleRecords()
	b := build(t, recs, 7, 3, 100)
	if err := b.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"BaseOffset", b.BaseOffset(), int64(0)},
		{"PartitionLeaderEpoch", b.PartitionLeaderEpoch(), int32(-1)},
		{"Magic", b.Magic(), int8(2)},
		{"RecordCount", b.RecordCount(), int32(4)},
		{"LastOffsetDelta", b.LastOffsetDelta(), int32(3)},
		{"FirstTimestamp", b.FirstTimestamp(), int64(1000)},
		{"MaxTimestamp", b.MaxTimestamp(), int64(1500)},
		{"ProducerID", b.ProducerID(), int64(7)},
		{"ProducerEpoch", b.ProducerEpoch(), int16(3)},
		{"BaseSequence", b.BaseSequence(), int32(100)},
		{"LastSequence", b.LastSequence(), int32(103)},
		{"Size", b.Size(), len(b)},
		{"TimestampType", b.TimestampType(), CreateTime},
		{"Compression", b.Compression(), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	b.SetBaseOffset(5000)
	i := 0
	for r, err := range b.Records() {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		w := recs[i]
		if r.Offset != 5000+int64(i) || r.Timestamp != w.Timestamp {
			t.Errorf("record %d: offset %d ts %d, want %d %d", i, r.Offset, r.Timestamp, 5000+i, w.Timestamp)
		}
		if !sameBytes(r.Key, w.Key) || !sameBytes(r.Value, w.Value) {
			t.Errorf("record %d: key/value differ", i)
		}
		if len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(r.Headers), len(w.Headers))
		}
		for j, h := range r.Headers {
			if h.Key != w.Headers[j].Key || !sameBytes(h.Value, w.Headers[j].Value) {
				t.Errorf("record %d header %d = %+v, want %+v", i, j, h, w.Headers[j])
			}
		}
		i++
	}
	if i != len(recs) {
		t.Fatalf("decoded %d records, want %d", i, len(recs))
	}
}

// sameBytes distinguishes nil (null) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestPatchersKeepCRC(t *testing.T) {
	b := build(t, sampleRecords()[:2], NoProducerID, NoProducerEpoch, NoSequence)
	crc := b.CRC()
	b.SetBaseOffset(math.MaxInt64 - 10)
	b.SetPartitionLeaderEpoch(42)
	if err := b.Validate(); err != nil {
		t.Fatalf("Validate after patch: %v", err)
	}
	if b.CRC() != crc || b.BaseOffset() != math.MaxInt64-10 || b.PartitionLeaderEpoch() != 42 {
		t.Fatalf("patch: crc %x base %d epoch %d", b.CRC(), b.BaseOffset(), b.PartitionLeaderEpoch())
	}
	if b.LastOffset() != math.MaxInt64-9 || b.NextOffset() != math.MaxInt64-8 {
		t.Fatalf("LastOffset %d NextOffset %d", b.LastOffset(), b.NextOffset())
	}
}

func TestEveryCoveredByteIsProtected(t *testing.T) {
	b := build(t, sampleRecords()[:3], 1, 0, 0)
	for i := offAttributes; i < len(b); i++ {
		c := Batch(bytes.Clone(b))
		c[i] ^= 0x40
		err := c.Validate()
		if kerr.CodeOf(err) != kerr.CorruptMessage {
			t.Fatalf("flipping byte %d: err %v, want CORRUPT_MESSAGE", i, err)
		}
	}
}

func TestAddSequenceWraps(t *testing.T) {
	cases := []struct{ seq, n, want int32 }{
		{0, 0, 0},
		{5, 3, 8},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 2, 5, 2},
		{math.MaxInt32 - 2, 2, math.MaxInt32},
	}
	for _, c := range cases {
		if got := AddSequence(c.seq, c.n); got != c.want {
			t.Errorf("AddSequence(%d, %d) = %d, want %d", c.seq, c.n, got, c.want)
		}
	}
	var bl Builder
	for i := range 4 {
		bl.Append(Record{Timestamp: int64(i)})
	}
	b := bl.Build(9, 0, math.MaxInt32-1)
	if got := b.LastSequence(); got != 1 {
		t.Fatalf("LastSequence across wrap = %d, want 1", got)
	}
}

func TestValidateErrors(t *testing.T) {
	good := build(t, sampleRecords()[:3], 4, 1, 0)
	cases := []struct {
		name string
		edit func(b Batch) Batch
		code kerr.Code
	}{
		{"short", func(b Batch) Batch { return b[:HeaderSize-1] }, kerr.CorruptMessage},
		{"length too big", func(b Batch) Batch { be.PutUint32(b[offBatchLength:], uint32(len(b))); return b }, kerr.CorruptMessage},
		{"length below minimum", func(b Batch) Batch { be.PutUint32(b[offBatchLength:], 10); return b }, kerr.CorruptMessage},
		{"truncated", func(b Batch) Batch { return b[:len(b)-1] }, kerr.CorruptMessage},
		{"magic", func(b Batch) Batch { b[offMagic] = 1; return b }, kerr.CorruptMessage},
		{"crc", func(b Batch) Batch { b[offCRC] ^= 1; return b }, kerr.CorruptMessage},
		{"unknown codec", func(b Batch) Batch { b[offAttributes+1] |= 5; fixCRC(b); return b }, kerr.InvalidRecord},
		{"not the codec it claims", func(b Batch) Batch { b[offAttributes+1] |= 1; fixCRC(b); return b }, kerr.CorruptMessage},
		{"transactional", func(b Batch) Batch { b[offAttributes+1] |= transactionalBit; fixCRC(b); return b }, kerr.InvalidRecord},
		{"count zero", func(b Batch) Batch {
			be.PutUint32(b[offRecordCount:], 0)
			be.PutUint32(b[offLastOffsetDelta:], math.MaxUint32)
			fixCRC(b)
			return b
		}, kerr.InvalidRecord},
		{"count too high", func(b Batch) Batch {
			be.PutUint32(b[offRecordCount:], 4)
			be.PutUint32(b[offLastOffsetDelta:], 3)
			fixCRC(b)
			return b
		}, kerr.CorruptMessage},
		{"count too low", func(b Batch) Batch {
			be.PutUint32(b[offRecordCount:], 2)
			be.PutUint32(b[offLastOffsetDelta:], 1)
			fixCRC(b)
			return b
		}, kerr.CorruptMessage},
		{"last delta mismatch", func(b Batch) Batch { be.PutUint32(b[offLastOffsetDelta:], 7); fixCRC(b); return b }, kerr.InvalidRecord},
		{"max timestamp", func(b Batch) Batch { be.PutUint64(b[offMaxTimestamp:], 1); fixCRC(b); return b }, kerr.InvalidRecord},
		{"negative producer id", func(b Batch) Batch { be.PutUint64(b[offProducerID:], math.MaxUint64-5); fixCRC(b); return b }, kerr.InvalidRecord},
		{"idempotent without sequence", func(b Batch) Batch { be.PutUint32(b[offBaseSequence:], math.MaxUint32); fixCRC(b); return b }, kerr.InvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.edit(Batch(bytes.Clone(good))).Validate()
			if got := kerr.CodeOf(err); got != c.code {
				t.Fatalf("err = %v (%v), want %v", err, got, c.code)
			}
		})
	}
}

func TestValidateRejectsSparseOffsetDeltas(t *testing.T) {
	// Hand-encode two records with deltas 0 and 2.
	var bl Builder
	bl.Append(Record{Timestamp: 10, Value: []byte("a")})
	bl.count = 2
	bl.Append(Record{Timestamp: 10, Value: []byte("b")})
	b := bl.Build(NoProducerID, NoProducerEpoch, NoSequence)
	be.PutUint32(b[offRecordCount:], 2)
	be.PutUint32(b[offLastOffsetDelta:], 1)
	fixCRC(b)
	if err := b.Validate(); kerr.CodeOf(err) != kerr.InvalidRecord {
		t.Fatalf("err = %v, want INVALID_RECORD", err)
	}
}

func TestLogAppendTimeSkipsMaxTimestampCheck(t *testing.T) {
	b := build(t, sampleRecords()[:2], NoProducerID, NoProducerEpoch, NoSequence)
	b[offAttributes+1] |= timestampTypeBit
	be.PutUint64(b[offMaxTimestamp:], 99999)
	fixCRC(b)
	if err := b.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if b.TimestampType() != LogAppendTime {
		t.Fatal("TimestampType is not LogAppendTime")
	}
}

func TestRecordsStopsOnDamage(t *testing.T) {
	b := build(t, sampleRecords()[:2], NoProducerID, NoProducerEpoch, NoSequence)
	b = b[:len(b)-3]
	be.PutUint32(b[offBatchLength:], uint32(len(b)-LengthOverhead))
	var errs int
	for _, err := range b.Records() {
		if err != nil {
			errs++
		}
	}
	if errs != 1 {
		t.Fatalf("got %d errors, want exactly 1", errs)
	}
}

func TestViewChecksFraming(t *testing.T) {
	b := build(t, sampleRecords()[:1], NoProducerID, NoProducerEpoch, NoSequence)
	if _, err := View(b); err != nil {
		t.Fatalf("View: %v", err)
	}
	if _, err := View(append(bytes.Clone(b), 0)); !errors.Is(err, kerr.Sentinel(kerr.CorruptMessage)) {
		t.Fatalf("View with a trailing byte: %v", err)
	}
}

func TestBuilderReset(t *testing.T) {
	var bl Builder
	for i := range 3 {
		bl.Append(Record{Timestamp: int64(i), Value: []byte(fmt.Sprint(i))})
	}
	bl.Build(NoProducerID, NoProducerEpoch, NoSequence)
	bl.Reset()
	bl.Append(Record{Timestamp: 50, Value: []byte("x")})
	b := bl.Build(NoProducerID, NoProducerEpoch, NoSequence)
	if err := b.Validate(); err != nil || b.RecordCount() != 1 || b.FirstTimestamp() != 50 {
		t.Fatalf("after Reset: err %v count %d first %d", err, b.RecordCount(), b.FirstTimestamp())
	}
}

// A builder on a reused buffer (dirty, from an earlier batch) builds the
// same bytes as a fresh one, and Release hands the buffer back.
func TestBuilderReuseBuildsTheSameBatch(t *testing.T) {
	recs := []Record{{Timestamp: 1000, Key: []byte("k"), Value: []byte("first")}, {Timestamp: 1005, Value: []byte("second")}}
	var fresh Builder
	for _, r := range recs {
		fresh.Append(r)
	}
	want := append([]byte(nil), fresh.Build(7, 1, 42)...)

	dirty := make([]byte, 4096)
	for i := range dirty {
		dirty[i] = 0xEE
	}
	var b Builder
	b.Reuse(dirty)
	for _, r := range recs {
		b.Append(r)
	}
	if got := b.Build(7, 1, 42); !bytes.Equal(got, want) {
		t.Fatalf("built on a reused buffer:\n%x\nwant\n%x", []byte(got), want)
	}
	if buf := b.Release(); cap(buf) != 4096 || b.Count() != 0 || b.Len() != HeaderSize {
		t.Fatalf("Release: cap %d, then count %d len %d", cap(buf), b.Count(), b.Len())
	}
}

package recordbatch

import (
	"errors"
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func compactable(t *testing.T) Batch {
	t.Helper()
	var b Builder
	for i, k := range []string{"a", "b", "a", "c"} {
		v := []byte("v" + k)
		if i == 3 {
			v = nil // a tombstone
		}
		b.Append(Record{Timestamp: 1000 + int64(i), Key: []byte(k), Value: v})
	}
	out := b.Build(7, 1, 40)
	out.SetBaseOffset(100)
	return Batch(append([]byte(nil), out...))
}

func TestRetainKeepsOffsetsAndHeader(t *testing.T) {
	b := compactable(t)
	out, kept, err := b.Retain(nil, false, func(r Record) bool { return r.Offset == 101 || r.Offset == 103 })
	if err != nil || kept != 2 {
		t.Fatalf("Retain = %d, %v", kept, err)
	}
	c := Batch(out)
	if err := c.ValidateStored(); err != nil {
		t.Fatalf("cleaned batch does not validate as stored: %v", err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "last offset delta 3 does not match record count 2") {
		t.Fatalf("a client's batch with a gap must stay refused, got %v", err)
	}
	if c.BaseOffset() != 100 || c.LastOffset() != 103 || c.LastSequence() != b.LastSequence() || c.MaxTimestamp() != b.MaxTimestamp() || c.RecordCount() != 2 {
		t.Fatalf("header changed: base %d last %d seq %d ts %d count %d", c.BaseOffset(), c.LastOffset(), c.LastSequence(), c.MaxTimestamp(), c.RecordCount())
	}
	var got []string
	for r, err := range c.Records() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(r.Key)+"@"+string(rune('0'+r.Offset-100)))
	}
	if strings.Join(got, ",") != "b@1,c@3" {
		t.Fatalf("records %v", got)
	}
}

func TestRetainEmpty(t *testing.T) {
	b := compactable(t)
	none := func(Record) bool { return false }
	if out, kept, err := b.Retain([]byte("x"), false, none); err != nil || kept != 0 || string(out) != "x" {
		t.Fatalf("dropped batch left %q, %d, %v", out, kept, err)
	}
	out, _, err := b.Retain(nil, true, none)
	if err != nil {
		t.Fatal(err)
	}
	c := Batch(out)
	if len(c) != HeaderSize || c.RecordCount() != 0 || c.LastSequence() != 43 || c.NextOffset() != 104 {
		t.Fatalf("empty batch: %d bytes, count %d, last seq %d, next %d", len(c), c.RecordCount(), c.LastSequence(), c.NextOffset())
	}
	if err := c.ValidateStored(); err != nil {
		t.Fatalf("empty cleaned batch: %v", err)
	}
}

func TestValidateStoredRefusesDisorder(t *testing.T) {
	b := compactable(t)
	out, _, _ := b.Retain(nil, false, func(r Record) bool { return r.Offset >= 102 })
	c := Batch(out)
	be.PutUint32(c[offLastOffsetDelta:], 2) // record at delta 3 now lies beyond the batch
	be.PutUint32(c[offCRC:], c.computeCRC())
	err := c.ValidateStored()
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Code != kerr.InvalidRecord || !strings.Contains(err.Error(), "offset delta 3 (must increase, at most 2)") {
		t.Fatalf("got %v", err)
	}
}

// As Kafka's cleaner, a CreateTime batch that loses the record carrying its
// maximum gets the largest kept timestamp as its maximum; a LogAppendTime
// batch keeps its append time.
func TestRetainRecomputesMaxTimestamp(t *testing.T) {
	keepFirstTwo := func(r Record) bool { return r.Offset <= 101 }
	b := compactable(t)
	out, kept, err := b.Retain(nil, false, keepFirstTwo)
	if err != nil || kept != 2 {
		t.Fatalf("Retain = %d, %v", kept, err)
	}
	c := Batch(out)
	if err := c.ValidateStored(); err != nil {
		t.Fatalf("cleaned batch does not validate as stored (crc?): %v", err)
	}
	if c.MaxTimestamp() != 1001 || c.FirstTimestamp() != b.FirstTimestamp() || c.LastOffset() != 103 || c.LastSequence() != b.LastSequence() {
		t.Fatalf("max %d (want 1001), first %d, last offset %d, last seq %d", c.MaxTimestamp(), c.FirstTimestamp(), c.LastOffset(), c.LastSequence())
	}

	// A thinned batch whose header kept a removed record's maximum (as an
	// older tidemark's cleaner left it) is put right when rewritten whole.
	be.PutUint64(c[offMaxTimestamp:], 1003)
	fixCRC(c)
	out, kept, err = c.Retain(nil, false, func(Record) bool { return true })
	if err != nil || kept != 2 || Batch(out).MaxTimestamp() != 1001 || Batch(out).ValidateStored() != nil {
		t.Fatalf("stale thinned batch rewritten: kept %d, max %d (want 1001), %v", kept, Batch(out).MaxTimestamp(), err)
	}
	// A dense batch kept whole is copied as it is.
	if out, _, err := b.Retain(nil, false, func(Record) bool { return true }); err != nil || string(out) != string(b) {
		t.Fatalf("a whole batch kept changed: %v", err)
	}

	lat := compactable(t)
	lat[offAttributes+1] |= timestampTypeBit
	be.PutUint64(lat[offMaxTimestamp:], 5000)
	fixCRC(lat)
	out, _, err = lat.Retain(nil, false, keepFirstTwo)
	if err != nil {
		t.Fatal(err)
	}
	if c := Batch(out); c.MaxTimestamp() != 5000 || c.ValidateStored() != nil {
		t.Fatalf("log append time batch: max %d (want 5000), %v", c.MaxTimestamp(), c.ValidateStored())
	}
}

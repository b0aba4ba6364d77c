package recordbatch

import (
	"bytes"
	"testing"

	"tidemark.io/services/platform/kerr"
)

// chain builds n batches with contiguous offsets, concatenated.
func chain(t testing.TB, n int) ([]byte, []int) {
	t.Helper()
	var out []byte
	var ends []int
	next := int64(0)
	for i := range n {
		var bl Builder
		for j := range i + 1 {
			bl.Append(Record{Timestamp: int64(j), Value: bytes.Repeat([]byte{byte(i)}, 10*j)})
		}
		b := bl.Build(NoProducerID, NoProducerEpoch, NoSequence)
		b.SetBaseOffset(next)
		next = b.NextOffset()
		out = append(out, b...)
		ends = append(ends, len(out))
	}
	return out, ends
}

func TestSplitTornAtEveryCut(t *testing.T) {
	buf, ends := chain(t, 4)
	for cut := 0; cut <= len(buf); cut++ {
		whole, torn := SplitTorn(buf[:cut])
		want := 0
		for _, e := range ends {
			if e <= cut {
				want = e
			}
		}
		if len(whole) != want || len(whole)+len(torn) != cut {
			t.Fatalf("cut %d: whole %d torn %d, want whole %d", cut, len(whole), len(torn), want)
		}
		n, err := ValidPrefix(buf[:cut])
		if n != want || (err == nil) != (want == cut) {
			t.Fatalf("cut %d: ValidPrefix = %d, %v; want %d", cut, n, err, want)
		}
	}
}

func TestAllYieldsBatchesThenTornError(t *testing.T) {
	buf, _ := chain(t, 3)
	var got []int64
	var tornErr error
	for b, err := range All(buf[:len(buf)-5]) {
		if err != nil {
			tornErr = err
			break
		}
		got = append(got, b.BaseOffset())
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("base offsets %v, want [0 1]", got)
	}
	if kerr.CodeOf(tornErr) != kerr.CorruptMessage {
		t.Fatalf("torn tail error = %v", tornErr)
	}
}

func TestValidPrefixStopsAtCorruptBatch(t *testing.T) {
	buf, ends := chain(t, 3)
	buf[ends[0]+HeaderSize+2] ^= 0xff // inside batch 1's records
	n, err := ValidPrefix(buf)
	if n != ends[0] || kerr.CodeOf(err) != kerr.CorruptMessage {
		t.Fatalf("ValidPrefix = %d, %v; want %d, CORRUPT_MESSAGE", n, err, ends[0])
	}
}

func TestSplitTornRejectsImpossibleLength(t *testing.T) {
	buf, ends := chain(t, 2)
	be.PutUint32(buf[ends[0]+offBatchLength:], 3)
	whole, torn := SplitTorn(buf)
	if len(whole) != ends[0] || len(torn) != len(buf)-ends[0] {
		t.Fatalf("whole %d torn %d", len(whole), len(torn))
	}
}

// LastEpochFrom names the epoch of the last whole batch that reaches from:
// a torn tail and batches wholly before from do not count.
func TestLastEpochFrom(t *testing.T) {
	buf, ends := chain(t, 4) // offsets [0] [1 2] [3 4 5] [6 7 8 9]
	for i, start := 0, 0; i < len(ends); i++ {
		Batch(buf[start:ends[i]]).SetPartitionLeaderEpoch(int32(10 + i))
		start = ends[i]
	}
	for _, c := range []struct {
		n         int
		from      int64
		epoch     int32
		ok        bool
		describes string
	}{
		{len(buf), 0, 13, true, "every batch whole"},
		{ends[2] + 5, 0, 12, true, "a torn last batch"},
		{ends[2], 5, 12, true, "the last batch ends just past from"},
		{ends[2], 6, 0, false, "every batch before from"},
		{ends[0] - 1, 0, 0, false, "nothing whole"},
	} {
		epoch, ok := LastEpochFrom(buf[:c.n], c.from)
		if epoch != c.epoch || ok != c.ok {
			t.Errorf("%s: LastEpochFrom = %d, %v; want %d, %v", c.describes, epoch, ok, c.epoch, c.ok)
		}
	}
}

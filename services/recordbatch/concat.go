package recordbatch

import (
	"iter"
)

// PeekSize returns the total size of the batch that starts buf, read from its
// length field, or ok=false when buf is too short to hold the 12-byte prefix.
// It does not check that the whole batch is present.
func PeekSize(buf []byte) (size int64, ok bool) {
	if len(buf) < LengthOverhead {
		return 0, false
	}
	return LengthOverhead + int64(int32(be.Uint32(buf[offBatchLength:]))), true
}

// SplitTorn splits a concatenation of batches at the first batch that is not
// wholly present or whose length field is impossible: whole holds the batches
// before it (checked by framing only), torn the rest. A log tail cut by a
// crash or a short read is torn; len(torn) == 0 means buf ends on a batch
// boundary.
func SplitTorn(buf []byte) (whole, torn []byte) {
	n := 0
	for {
		size, ok := PeekSize(buf[n:])
		if !ok || size < HeaderSize || size > int64(len(buf)-n) {
			return buf[:n], buf[n:]
		}
		n += int(size)
	}
}

// All iterates over the batches of a concatenation, checking framing only.
// A trailing partial batch or an impossible length ends the iteration with an
// error (CORRUPT_MESSAGE) yielded alongside a nil Batch.
func All(buf []byte) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		whole, torn := SplitTorn(buf)
		for len(whole) > 0 {
			size, _ := PeekSize(whole)
			if !yield(Batch(whole[:size]), nil) {
				return
			}
			whole = whole[size:]
		}
		if len(torn) > 0 {
			yield(nil, corruptf("%d trailing bytes do not form a whole batch", len(torn)))
		}
	}
}

// LastEpochFrom is the partition leader epoch of the last whole batch in buf
// that holds offsets at or after from: the epoch a reader that read buf from
// there names as its last fetched epoch (KIP-320). ok is false when no such
// batch is whole.
func LastEpochFrom(buf []byte, from int64) (epoch int32, ok bool) {
	whole, _ := SplitTorn(buf)
	for b, err := range All(whole) {
		if err != nil {
			break
		}
		if b.NextOffset() > from {
			epoch, ok = b.PartitionLeaderEpoch(), true
		}
	}
	return epoch, ok
}

// ValidPrefix validates the batches of a concatenation in order and returns
// the length of the longest prefix made of valid batches, with the error that
// stopped it (nil when all of buf is valid).
func ValidPrefix(buf []byte) (int, error) {
	n := 0
	for b, err := range All(buf) {
		if err != nil {
			return n, err
		}
		if err := b.Validate(); err != nil {
			return n, err
		}
		n += len(b)
	}
	return n, nil
}

// ClaimedRecords sums the record counts the batch headers in buf claim,
// reading headers only (no record is looked at), so a request's size can be
// judged before any work proportional to it. It stops at the first batch
// whose header is not wholly present; validation reports that one later.
func ClaimedRecords(buf []byte) int64 {
	var n int64
	for len(buf) >= HeaderSize {
		size, _ := PeekSize(buf)
		if size < HeaderSize {
			break
		}
		n += int64(Batch(buf).RecordCount())
		if size > int64(len(buf)) {
			break
		}
		buf = buf[size:]
	}
	return n
}

package recordbatch

import (
	"encoding/binary"
	"errors"
)

// checkFrame checks that buf holds exactly one batch by its length field.
func checkFrame(buf []byte) error {
	if len(buf) < HeaderSize {
		return corruptf("batch of %d bytes is shorter than the %d-byte header", len(buf), HeaderSize)
	}
	n := int32(be.Uint32(buf[offBatchLength:]))
	if n < MinBatchLength {
		return corruptf("batch length %d is below the minimum %d", n, MinBatchLength)
	}
	if int64(n)+LengthOverhead != int64(len(buf)) {
		return corruptf("batch length %d does not match the %d bytes given", n, len(buf)-LengthOverhead)
	}
	return nil
}

// Validate checks one whole batch: framing, magic, CRC, attributes, producer
// fields, and that the records (decompressed, for a compressed batch) parse
// exactly to the end with dense offset
// deltas matching recordCount and lastOffsetDelta, and (for CreateTime) a
// maxTimestamp equal to the largest record timestamp. Damaged bytes give
// CORRUPT_MESSAGE; well-formed but unacceptable contents give INVALID_RECORD.
func (b Batch) Validate() error {
	_, err := b.ValidateSummary()
	return err
}

// Summary is what validation saw walking a batch's records, so that a
// caller needs none of its own walks (for a compressed batch, another
// decompression) to learn it.
type Summary struct {
	// Headers is the number of record headers, all records together.
	Headers int64
	// MinTimestamp is what Batch.MinTimestamp answers.
	MinTimestamp int64
	// Keyless is the index of the first record with a null key; -1: none.
	Keyless int32
}

// ValidateSummary is Validate, also answering what the walk over the records
// saw (the zero Summary on error).
func (b Batch) ValidateSummary() (Summary, error) {
	if err := checkFrame(b); err != nil {
		return Summary{}, err
	}
	if m := b.Magic(); m != Magic {
		return Summary{}, corruptf("unsupported magic %d (want %d)", m, Magic)
	}
	if got, want := b.CRC(), b.computeCRC(); got != want {
		return Summary{}, corruptf("crc mismatch: header %#08x, computed %#08x", got, want)
	}
	if err := b.checkHeaderContents(); err != nil {
		return Summary{}, err
	}
	return b.checkRecords()
}

// Validate is shorthand for Batch(buf).Validate().
func Validate(buf []byte) error { return Batch(buf).Validate() }

func (b Batch) checkHeaderContents() error {
	attrs := b.Attributes()
	if c := Codec(attrs & compressionMask); c > Zstd {
		return invalidf("compression codec %d is not supported", c)
	}
	if attrs&(transactionalBit|controlBit) != 0 {
		return invalidf("transactional and control batches are not supported (attributes %#x)", attrs)
	}
	if n := b.RecordCount(); n < 1 {
		return invalidf("record count %d: a batch must hold at least one record", n)
	}
	if d, n := b.LastOffsetDelta(), b.RecordCount(); d != n-1 {
		return invalidf("last offset delta %d does not match record count %d", d, n)
	}
	pid, epoch, seq := b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
	switch {
	case pid < NoProducerID:
		return invalidf("producer id %d is negative", pid)
	case pid >= 0 && (epoch < 0 || seq < 0):
		return invalidf("idempotent batch (producer id %d) needs epoch >= 0 and sequence >= 0, got %d and %d", pid, epoch, seq)
	}
	return nil
}

// checkRecords walks the records without decoding them into values: this is
// on every append's path, so it is a flat loop over local slices.
func (b Batch) checkRecords() (Summary, error) {
	n := b.RecordCount()
	first := b.FirstTimestamp()
	maxTS := int64(-1 << 63)
	sum := Summary{MinTimestamp: first, Keyless: -1}
	p, err := b.records()
	if err != nil {
		return Summary{}, err
	}
	pos := HeaderSize
	for i := range n {
		if len(p) == 0 {
			return Summary{}, corruptf("record count %d but records end after %d", n, i)
		}
		length, k := varint(p)
		if k <= 0 || length < 1 || length > int64(len(p)-k) {
			return Summary{}, corruptf("record %d: bad length at byte %d", i, pos)
		}
		body, end := p[k:k+int(length)], pos+k+int(length)
		p, pos = p[k+int(length):], end
		rs, err := skipRecordBody(body[1:])
		if err != nil {
			return Summary{}, corruptf("record %d at byte %d: %v", i, end-int(length)-k, err)
		}
		if rs.offDelta != int64(i) {
			return Summary{}, invalidf("record %d has offset delta %d (deltas must be dense)", i, rs.offDelta)
		}
		maxTS = max(maxTS, first+rs.tsDelta)
		sum.MinTimestamp = min(sum.MinTimestamp, first+rs.tsDelta)
		sum.Headers += rs.headers
		if rs.nullKey && sum.Keyless < 0 {
			sum.Keyless = i
		}
	}
	if len(p) != 0 {
		return Summary{}, corruptf("%d bytes after the last of %d records", len(p), n)
	}
	if b.TimestampType() == CreateTime && b.MaxTimestamp() != maxTS {
		return Summary{}, invalidf("max timestamp %d does not match the largest record timestamp %d", b.MaxTimestamp(), maxTS)
	}
	return sum, nil
}

// recordShape is what skipRecordBody learns of one record.
type recordShape struct {
	tsDelta, offDelta int64
	headers           int64
	nullKey           bool
}

// skipRecordBody checks a record body after its attributes byte: the
// varints and lengths must be sane and consume it exactly.
func skipRecordBody(p []byte) (rs recordShape, err error) {
	var k int
	if rs.tsDelta, k = varint(p); k <= 0 {
		return rs, errBadVarint
	}
	p = p[k:]
	if rs.offDelta, k = varint(p); k <= 0 || rs.offDelta > maxInt32 || rs.offDelta < minInt32 {
		return rs, errBadVarint
	}
	p = p[k:]
	if key, k := varint(p); k > 0 && key == -1 {
		rs.nullKey = true
	}
	for range 2 { // key, value
		if p, err = skipBytes(p, true); err != nil {
			return rs, err
		}
	}
	count, k := varint(p)
	if k <= 0 || count < 0 || count > int64(len(p)) {
		return rs, errBadHeaders
	}
	p = p[k:]
	for range count {
		if p, err = skipBytes(p, false); err != nil {
			return rs, err
		}
		if p, err = skipBytes(p, true); err != nil {
			return rs, err
		}
	}
	if len(p) != 0 {
		return rs, errTrailing
	}
	rs.headers = count
	return rs, nil
}

func skipBytes(p []byte, nullable bool) ([]byte, error) {
	n, k := varint(p)
	switch {
	case k <= 0:
		return nil, errBadVarint
	case n == -1 && nullable:
		return p[k:], nil
	case n < 0 || n > int64(len(p)-k):
		return nil, errBadLength
	}
	return p[k+int(n):], nil
}

// varint reads a zigzag varint; one-byte values take an inlined fast path.
func varint(p []byte) (int64, int) {
	if len(p) > 0 && p[0] < 0x80 {
		u := int64(p[0])
		return (u >> 1) ^ -(u & 1), 1
	}
	return binary.Varint(p)
}

const (
	maxInt32 = 1<<31 - 1
	minInt32 = -1 << 31
)

var (
	errBadVarint  = errors.New("bad varint")
	errBadLength  = errors.New("bad length")
	errBadHeaders = errors.New("bad header count")
	errTrailing   = errors.New("trailing bytes")
)

// MinTimestamp is the smallest record timestamp of a validated batch (the
// header keeps only the first and the largest), walking the record headers
// without decoding keys or values.
func (b Batch) MinTimestamp() int64 {
	first := b.FirstTimestamp()
	lo := first
	p, err := b.records()
	if err != nil {
		return first
	}
	for range b.RecordCount() {
		length, k := varint(p)
		if k <= 0 || length < 1 || length > int64(len(p)-k) {
			break
		}
		body := p[k+1 : k+int(length)] // after the attributes byte
		p = p[k+int(length):]
		if d, n := varint(body); n > 0 {
			lo = min(lo, first+d)
		}
	}
	return lo
}

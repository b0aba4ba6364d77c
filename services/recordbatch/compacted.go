package recordbatch

import (
	"hash/crc32"
	"math"
)

// Compaction (the log cleaner) removes records from a batch but never
// renumbers them: a cleaned batch keeps its header (base offset, leader
// epoch, lastOffsetDelta, first timestamp, producer fields; the maximum
// timestamp becomes its kept records', see Retain) and holds a subset of its
// records, so offset deltas may have gaps and, for the last batch of an
// idempotent producer, no record may be left at all (Kafka keeps such an
// empty batch so the producer's last sequence survives). Leaders accept only
// dense batches from clients (Validate); a stored or replicated batch may be
// a cleaned one (ValidateStored).

// ValidateStored is Validate for batches read from a log or from a leader:
// it also accepts what compaction leaves. Offset deltas must increase within
// [0, lastOffsetDelta], recordCount may be anything from 0 to
// lastOffsetDelta+1, and a CreateTime maxTimestamp must be at least the
// largest record timestamp (an empty batch, and a batch an older tidemark
// thinned, keep the original's).
func (b Batch) ValidateStored() error {
	if err := checkFrame(b); err != nil {
		return err
	}
	if m := b.Magic(); m != Magic {
		return corruptf("unsupported magic %d (want %d)", m, Magic)
	}
	if got, want := b.CRC(), b.computeCRC(); got != want {
		return corruptf("crc mismatch: header %#08x, computed %#08x", got, want)
	}
	if b.RecordCount() == b.LastOffsetDelta()+1 && b.RecordCount() >= 1 {
		if err := b.checkHeaderContents(); err != nil {
			return err
		}
		_, err := b.checkRecords()
		return err
	}
	return b.checkCompacted()
}

// ValidateStored is shorthand for Batch(buf).ValidateStored().
func ValidateStored(buf []byte) error { return Batch(buf).ValidateStored() }

func (b Batch) checkCompacted() error {
	attrs := b.Attributes()
	if c := Codec(attrs & compressionMask); c > Zstd {
		return invalidf("compression codec %d is not supported", c)
	}
	if attrs&(transactionalBit|controlBit) != 0 {
		return invalidf("transactional and control batches are not supported (attributes %#x)", attrs)
	}
	n, last := b.RecordCount(), b.LastOffsetDelta()
	if n < 0 || last < 0 || int64(n) > int64(last)+1 {
		return invalidf("record count %d does not fit last offset delta %d", n, last)
	}
	if pid := b.ProducerID(); pid < NoProducerID {
		return invalidf("producer id %d is negative", pid)
	}
	first := b.FirstTimestamp()
	maxTS := int64(-1 << 63)
	prev := int64(-1)
	p, err := b.records()
	if err != nil {
		return err
	}
	pos := HeaderSize
	for i := range n {
		if len(p) == 0 {
			return corruptf("record count %d but records end after %d", n, i)
		}
		length, k := varint(p)
		if k <= 0 || length < 1 || length > int64(len(p)-k) {
			return corruptf("record %d: bad length at byte %d", i, pos)
		}
		body, end := p[k:k+int(length)], pos+k+int(length)
		p, pos = p[k+int(length):], end
		rs, err := skipRecordBody(body[1:])
		if err != nil {
			return corruptf("record %d at byte %d: %v", i, end-int(length)-k, err)
		}
		if rs.offDelta <= prev || rs.offDelta > int64(last) {
			return invalidf("record %d has offset delta %d (must increase, at most %d)", i, rs.offDelta, last)
		}
		prev = rs.offDelta
		maxTS = max(maxTS, first+rs.tsDelta)
	}
	if len(p) != 0 {
		return corruptf("%d bytes after the last of %d records", len(p), n)
	}
	if n > 0 && b.TimestampType() == CreateTime && b.MaxTimestamp() < maxTS {
		return invalidf("max timestamp %d is below the largest record timestamp %d", b.MaxTimestamp(), maxTS)
	}
	return nil
}

// Retain appends to dst a copy of b holding only the records for which keep
// returns true, and returns the extended dst and how many records were
// kept. b must have passed ValidateStored. With keepEmpty false a batch left
// with no record is not written at all. A compressed batch's kept records
// are compressed again with its codec.
//
// Record bytes are copied as they are, so offsets and timestamps stay what
// they were, and the header keeps b's base offset and lastOffsetDelta (the
// producer's last sequence must survive). As Kafka's cleaner, a CreateTime
// batch left with some but not all of the offsets it spans gets the largest
// timestamp of the kept records as its maxTimestamp, so the time index and
// MAX_TIMESTAMP lookups never point at a record cleaned away (a batch thinned
// by an older tidemark, which kept the removed record's maximum, is put
// right when rewritten); a LogAppendTime batch keeps its append time, and a
// batch kept whole or left empty keeps its header's maximum.
func (b Batch) Retain(dst []byte, keepEmpty bool, keep func(r Record) bool) ([]byte, int, error) {
	start := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	p, err := b.records()
	if err != nil {
		return dst[:start], 0, err
	}
	codec := b.Codec()
	var plain []byte // the kept records of a compressed batch, before compression
	kept := int32(0)
	keptMax := int64(math.MinInt64)
	for r, rerr := range b.Records() {
		if rerr != nil {
			err = rerr
			break
		}
		length, k := varint(p)
		raw := p[:k+int(length)]
		p = p[k+int(length):]
		if keep(r) {
			if codec == None {
				dst = append(dst, raw...)
			} else {
				plain = append(plain, raw...)
			}
			kept++
			keptMax = max(keptMax, r.Timestamp)
		}
	}
	if err != nil {
		return dst[:start], 0, err
	}
	if kept == 0 && !keepEmpty {
		return dst[:start], 0, nil
	}
	if codec != None {
		z, cerr := Compress(codec, plain)
		if cerr != nil {
			return dst[:start], 0, cerr
		}
		dst = append(dst, z...)
	}
	out := dst[start:]
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LengthOverhead))
	be.PutUint32(out[offRecordCount:], uint32(kept))
	if kept > 0 && kept <= b.LastOffsetDelta() && b.TimestampType() == CreateTime {
		be.PutUint64(out[offMaxTimestamp:], uint64(keptMax))
	}
	be.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return dst, int(kept), nil
}

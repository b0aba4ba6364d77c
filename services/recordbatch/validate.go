package recordbatch

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
// fields, and that the records parse exactly to the end with dense offset
// deltas matching recordCount and lastOffsetDelta, and (for CreateTime) a
// maxTimestamp equal to the largest record timestamp. Damaged bytes give
// CORRUPT_MESSAGE; well-formed but unacceptable contents give INVALID_RECORD.
func (b Batch) Validate() error {
	if err := checkFrame(b); err != nil {
		return err
	}
	if m := b.Magic(); m != Magic {
		return corruptf("unsupported magic %d (want %d)", m, Magic)
	}
	if got, want := b.CRC(), b.computeCRC(); got != want {
		return corruptf("crc mismatch: header %#08x, computed %#08x", got, want)
	}
	if err := b.checkHeaderContents(); err != nil {
		return err
	}
	return b.checkRecords()
}

// Validate is shorthand for Batch(buf).Validate().
func Validate(buf []byte) error { return Batch(buf).Validate() }

func (b Batch) checkHeaderContents() error {
	attrs := b.Attributes()
	if c := attrs & compressionMask; c != 0 {
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

func (b Batch) checkRecords() error {
	d := decoder{buf: b[HeaderSize:], pos: HeaderSize}
	n := b.RecordCount()
	first := b.FirstTimestamp()
	maxTS := int64(-1 << 63)
	var r rawRecord
	for i := range n {
		if len(d.buf) == 0 {
			return corruptf("record count %d but records end after %d", n, i)
		}
		if err := d.record(&r, false); err != nil {
			return err
		}
		if r.offsetDelta != i {
			return invalidf("record %d has offset delta %d (deltas must be dense)", i, r.offsetDelta)
		}
		maxTS = max(maxTS, first+r.timestampDelta)
	}
	if len(d.buf) != 0 {
		return corruptf("%d bytes after the last of %d records", len(d.buf), n)
	}
	if b.TimestampType() == CreateTime && b.MaxTimestamp() != maxTS {
		return invalidf("max timestamp %d does not match the largest record timestamp %d", b.MaxTimestamp(), maxTS)
	}
	return nil
}

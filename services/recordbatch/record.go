package recordbatch

import (
	"encoding/binary"
	"iter"
	"math"
)

// Record is one record. On decode, Key, Value and header values alias the
// batch's bytes; a nil Key or Value is a null one.
type Record struct {
	// Offset is absolute (baseOffset + offsetDelta); Builder.Append ignores it.
	Offset int64
	// Timestamp is absolute (firstTimestamp + timestampDelta).
	Timestamp  int64
	Key        []byte
	Value      []byte
	Headers    []Header
	Attributes int8
}

// Header is a record header. A header key may not be null; a value may.
type Header struct {
	Key   string
	Value []byte
}

// Records iterates over the batch's records. It stops after the first error,
// which it yields with a zero Record. The batch should have passed Validate;
// on an unvalidated batch the iterator still never reads out of bounds.
func (b Batch) Records() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if err := checkFrame(b); err != nil {
			yield(Record{}, err)
			return
		}
		recs, err := b.records()
		if err != nil {
			yield(Record{}, err)
			return
		}
		d := decoder{buf: recs, pos: HeaderSize}
		base, first := b.BaseOffset(), b.FirstTimestamp()
		n := b.RecordCount()
		for i := int32(0); i < n; i++ {
			var r rawRecord
			if err := d.record(&r); err != nil {
				yield(Record{}, err)
				return
			}
			rec := Record{
				Offset:     base + int64(r.offsetDelta),
				Timestamp:  first + r.timestampDelta,
				Key:        r.key,
				Value:      r.value,
				Headers:    r.headers,
				Attributes: r.attributes,
			}
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// rawRecord is a record as encoded, with deltas.
type rawRecord struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	key, value     []byte
	headers        []Header
}

// decoder walks the records section. pos is the position in the whole batch,
// for error messages.
type decoder struct {
	buf []byte
	pos int
}

// varint reads a zigzag varint. One-byte values (most deltas and short
// lengths) take a fast path the compiler can inline.
func (d *decoder) varint(what string) (int64, error) {
	if len(d.buf) > 0 && d.buf[0] < 0x80 {
		u := int64(d.buf[0])
		d.buf, d.pos = d.buf[1:], d.pos+1
		return (u >> 1) ^ -(u & 1), nil
	}
	return d.varintSlow(what)
}

func (d *decoder) varintSlow(what string) (int64, error) {
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		return 0, corruptf("bad %s varint at byte %d", what, d.pos)
	}
	d.buf, d.pos = d.buf[n:], d.pos+n
	return v, nil
}

func (d *decoder) varint32(what string) (int32, error) {
	v, err := d.varint(what)
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, corruptf("%s %d out of int32 range at byte %d", what, v, d.pos)
	}
	return int32(v), nil
}

// bytes reads a length-prefixed byte string; length -1 is null. what names
// the length field in errors (a constant, so the hot path never allocates).
func (d *decoder) bytes(what string, nullable bool) ([]byte, error) {
	n, err := d.varint32(what)
	if err != nil {
		return nil, err
	}
	if n == -1 && nullable {
		return nil, nil
	}
	if n < 0 || int(n) > len(d.buf) {
		return nil, corruptf("%s %d invalid at byte %d (%d bytes left)", what, n, d.pos, len(d.buf))
	}
	v := d.buf[:n:n]
	d.buf, d.pos = d.buf[n:], d.pos+int(n)
	return v, nil
}

// record decodes one record.
func (d *decoder) record(r *rawRecord) error {
	start := d.pos
	length, err := d.varint32("record length")
	if err != nil {
		return err
	}
	if length < 1 || int(length) > len(d.buf) {
		return corruptf("record length %d invalid at byte %d (%d bytes left)", length, start, len(d.buf))
	}
	body := decoder{buf: d.buf[:length], pos: d.pos}
	d.buf, d.pos = d.buf[length:], d.pos+int(length)

	r.attributes = int8(body.buf[0])
	body.buf, body.pos = body.buf[1:], body.pos+1
	if r.timestampDelta, err = body.varint("timestamp delta"); err != nil {
		return err
	}
	if r.offsetDelta, err = body.varint32("offset delta"); err != nil {
		return err
	}
	if r.key, err = body.bytes("key length", true); err != nil {
		return err
	}
	if r.value, err = body.bytes("value length", true); err != nil {
		return err
	}
	count, err := body.varint32("header count")
	if err != nil {
		return err
	}
	if count < 0 || int(count) > len(body.buf) {
		return corruptf("header count %d invalid at byte %d", count, body.pos)
	}
	r.headers = nil
	if count > 0 {
		r.headers = make([]Header, 0, count)
	}
	for range count {
		k, err := body.bytes("header key length", false)
		if err != nil {
			return err
		}
		v, err := body.bytes("header value length", true)
		if err != nil {
			return err
		}
		r.headers = append(r.headers, Header{Key: string(k), Value: v})
	}
	if len(body.buf) != 0 {
		return corruptf("record at byte %d has %d trailing bytes", start, len(body.buf))
	}
	return nil
}

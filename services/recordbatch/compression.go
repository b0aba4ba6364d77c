package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a batch's compression codec (attribute bits 0-2), Kafka's
// numbering. A compressed batch compresses its records section only; the
// 61-byte header stays plain, and the CRC covers the compressed bytes.
// Batches are stored and served as the producer sent them, as Kafka does
// with compression.type=producer; the broker decompresses only to validate
// them, to answer structured reads (gRPC, REST) and to compact.
type Codec int8

const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec-%d", int8(c))
}

// MaxDecompressedSize bounds what one batch's records may grow to when
// decompressed, so a small hostile batch cannot exhaust memory.
const MaxDecompressedSize = 256 << 20

// maxDecompressed is MaxDecompressedSize; tests lower it.
var maxDecompressed = MaxDecompressedSize

var errTooLarge = errors.New("decompressed records exceed the bound on a batch's size")

// Codec is the batch's compression codec.
func (b Batch) Codec() Codec { return Codec(b.Attributes() & compressionMask) }

// records is the batch's records section, decompressed when the batch is
// compressed (a fresh buffer; otherwise an alias of b). Bad compressed data
// is CORRUPT_MESSAGE; an unknown codec INVALID_RECORD.
func (b Batch) records() ([]byte, error) {
	raw := []byte(b[HeaderSize:])
	c := b.Codec()
	if c == None {
		return raw, nil
	}
	out, err := Decompress(c, raw)
	if errors.Is(err, errUnknownCodec) {
		return nil, invalidf("compression codec %d is not supported", int8(c))
	}
	if err != nil {
		return nil, corruptf("%s records: %v", c, err)
	}
	return out, nil
}

var errUnknownCodec = errors.New("unknown codec")

var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxDecompressedSize), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic(err) // only bad options fail
	}
	return d
})

// Decompress returns the records section data compressed with c holds.
func Decompress(c Codec, data []byte) ([]byte, error) {
	switch c {
	case None:
		return data, nil
	case Gzip:
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return readBounded(r)
	case Snappy:
		return decodeSnappy(data)
	case LZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(data)))
	case Zstd:
		out, err := zstdDecoder().DecodeAll(data, nil)
		if err == nil && len(out) > maxDecompressed {
			return nil, errTooLarge
		}
		return out, err
	}
	return nil, errUnknownCodec
}

func readBounded(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(maxDecompressed)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxDecompressed {
		return nil, errTooLarge
	}
	return out, nil
}

// xerialMagic starts snappy data in the Java client's framing (xerial's
// SnappyOutputStream); other clients send one raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func decodeSnappy(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		return decodeSnappyBlock(nil, data)
	}
	if len(data) < 16 {
		return nil, errors.New("short xerial snappy header")
	}
	var out []byte
	for p := data[16:]; len(p) > 0; {
		if len(p) < 4 {
			return nil, errors.New("truncated xerial snappy chunk")
		}
		n := binary.BigEndian.Uint32(p)
		if uint64(n) > uint64(len(p)-4) {
			return nil, errors.New("xerial snappy chunk overruns the data")
		}
		var err error
		if out, err = decodeSnappyBlock(out, p[4:4+n]); err != nil {
			return nil, err
		}
		p = p[4+n:]
	}
	return out, nil
}

func decodeSnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n < 0 || len(dst)+n > maxDecompressed {
		return nil, errTooLarge
	}
	// The length is the sender's claim, and Decode allocates it before
	// looking at the data: no snappy element yields more than 64 bytes from
	// 3 (a 2-byte-offset copy), so a claim beyond that ratio is a lie.
	if n > len(block)*64/3+64 {
		return nil, fmt.Errorf("snappy block of %d bytes claims %d decoded bytes", len(block), n)
	}
	out, err := snappy.Decode(nil, block)
	if err != nil {
		return nil, err
	}
	return append(dst, out...), nil
}

var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	return e
})

// Compress compresses a records section with c (the cleaner rewrites a
// compacted compressed batch with its own codec).
func Compress(c Codec, data []byte) ([]byte, error) {
	switch c {
	case None:
		return data, nil
	case Gzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Snappy:
		return snappy.Encode(nil, data), nil
	case LZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Zstd:
		return zstdEncoder().EncodeAll(data, nil), nil
	}
	return nil, errUnknownCodec
}

// Compressed returns a copy of the uncompressed batch b with its records
// compressed with c (header unchanged but for the codec bits, length and
// CRC), as a producer would send it.
func (b Batch) Compressed(c Codec) (Batch, error) {
	if b.Codec() != None {
		return nil, invalidf("batch is already compressed with %s", b.Codec())
	}
	z, err := Compress(c, b[HeaderSize:])
	if err != nil {
		return nil, err
	}
	out := append(append(make([]byte, 0, HeaderSize+len(z)), b[:HeaderSize]...), z...)
	attrs := uint16(b.Attributes())&^compressionMask | uint16(c)
	be.PutUint16(out[offAttributes:], attrs)
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LengthOverhead))
	be.PutUint32(out[offCRC:], Batch(out).computeCRC())
	return out, nil
}

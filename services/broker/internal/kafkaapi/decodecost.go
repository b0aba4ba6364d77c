package kafkaapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsg's decoders allocate an array's elements before reading them,
// trusting its count up to one or two bytes per element, and keep each
// unknown tagged field in a map of its own: a request can make them
// allocate far more than its size (measured: 32× for a count with
// nothing behind it, 80× for elements of empty fields with one tag
// each). So the cost of decoding is bounded before decoding.
const (
	// maxRequestBytesWithoutRecords bounds every request but Produce,
	// the only one that carries record data; Kafka's others are small.
	maxRequestBytesWithoutRecords = 1 << 20
	// decodeAmplification bounds, above what was measured, what kmsg
	// allocates per byte of a request other than Produce.
	decodeAmplification = 128
	// A tagged-field section with tags costs kmsg a map: about this much
	// for the map and this much per tag (measured ~340 and ~160).
	tagSectionCost = 512
	tagCost        = 256
)

var (
	produceTopicSize     = int64(unsafe.Sizeof(kmsg.ProduceRequestTopic{}))
	producePartitionSize = int64(unsafe.Sizeof(kmsg.ProduceRequestTopicPartition{}))
)

// decodeCost is a bound on what decoding body (a request of key and
// version, after its header) allocates beyond copies of its bytes, or an
// error if it may not be decoded: a request other than Produce larger
// than maxRequestBytesWithoutRecords, a Produce whose counts its bytes do
// not hold, or whose structure costs more than maxBytes.
func decodeCost(key, version int16, body []byte, maxBytes int32) (int64, error) {
	if key != int16(kmsg.Produce) {
		if len(body) > maxRequestBytesWithoutRecords {
			return 0, fmt.Errorf("%s of %d bytes is over %d, the limit of requests without records", kmsg.NameForKey(key), len(body), maxRequestBytesWithoutRecords)
		}
		return int64(len(body)) * decodeAmplification, nil
	}
	cost, err := produceCost(body, version >= 9)
	if err != nil {
		return 0, fmt.Errorf("Produce v%d: %w", version, err)
	}
	if cost > int64(maxBytes) {
		return 0, fmt.Errorf("Produce v%d's topics, partitions and tags would take %d bytes to decode, over socket.request.max.bytes %d", version, cost, maxBytes)
	}
	return cost, nil
}

var errShortProduce = errors.New("body shorter than its counts claim")

// walker reads a Produce body (v3-v11) without decoding it.
type walker struct {
	b        []byte
	flexible bool
	err      error
}

func (w *walker) skip(n int64) {
	if w.err == nil && (n < 0 || n > int64(len(w.b))) {
		w.err = errShortProduce
	}
	if w.err == nil {
		w.b = w.b[n:]
	}
}

func (w *walker) uvarint() int64 {
	if w.err != nil {
		return 0
	}
	v, k := binary.Uvarint(w.b)
	if k <= 0 || v > 1<<31 {
		w.err = errShortProduce
		return 0
	}
	w.b = w.b[k:]
	return int64(v)
}

// length reads a string's (width 2), bytes' or array's (4) length; -1 is
// null.
func (w *walker) length(width int) int64 {
	if w.flexible {
		return w.uvarint() - 1
	}
	if w.err == nil && len(w.b) < width {
		w.err = errShortProduce
	}
	if w.err != nil {
		return 0
	}
	var n int64
	if width == 2 {
		n = int64(int16(binary.BigEndian.Uint16(w.b)))
	} else {
		n = int64(int32(binary.BigEndian.Uint32(w.b)))
	}
	w.b = w.b[width:]
	return n
}

func (w *walker) bytes(width int) {
	if n := w.length(width); n > 0 {
		w.skip(n)
	}
}

// tags skips a tagged-field section and returns what kmsg allocates for it.
func (w *walker) tags() int64 {
	if !w.flexible {
		return 0
	}
	n := w.uvarint()
	for range n {
		w.uvarint()
		w.skip(w.uvarint())
		if w.err != nil {
			return 0
		}
	}
	if n == 0 {
		return 0
	}
	return tagSectionCost + n*tagCost
}

func produceCost(body []byte, flexible bool) (int64, error) {
	w := &walker{b: body, flexible: flexible}
	w.bytes(2) // transactional id
	w.skip(2 + 4)
	topics := w.length(4)
	cost := max(topics, 0) * produceTopicSize
	for range topics {
		w.bytes(2)
		partitions := w.length(4)
		cost += max(partitions, 0) * producePartitionSize
		for range partitions {
			w.skip(4)
			w.bytes(4) // records
			cost += w.tags()
			if w.err != nil {
				return 0, w.err
			}
		}
		cost += w.tags()
		if w.err != nil {
			return 0, w.err
		}
	}
	cost += w.tags()
	return cost, w.err
}

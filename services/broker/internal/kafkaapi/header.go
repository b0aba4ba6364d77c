package kafkaapi

import (
	"encoding/binary"
	"errors"
)

// requestHeader is Kafka's request header, v1 (key, version, correlation id,
// client id) or v2 (v1 plus tagged fields, for flexible versions).
type requestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

var errShortHeader = errors.New("request shorter than its header")

// parseHeaderStart reads the fixed part every request starts with and the
// client id; the tagged fields of a flexible header follow in the returned
// rest (skipTags reads them once the version is known to be flexible).
func parseHeaderStart(b []byte) (requestHeader, []byte, error) {
	var h requestHeader
	if len(b) < 10 {
		return h, nil, errShortHeader
	}
	h.Key = int16(binary.BigEndian.Uint16(b))
	h.Version = int16(binary.BigEndian.Uint16(b[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(b[4:]))
	n := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if n >= 0 {
		if int(n) > len(b) {
			return h, nil, errShortHeader
		}
		h.ClientID, b = string(b[:n]), b[n:]
	} else if n != -1 {
		return h, nil, errors.New("negative client id length")
	}
	return h, b, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("bad tagged field count")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// appendResponseHeader starts a response frame: the size (patched by
// finishFrame), the correlation id and, for a flexible header, an empty
// tagged-field section.
func appendResponseHeader(dst []byte, correlationID int32, flexible bool) []byte {
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

func finishFrame(frame []byte) []byte {
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

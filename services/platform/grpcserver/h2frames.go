package grpcserver

import "encoding/binary"

// The answer budget (answerbudget.go) learns when an answer has left from
// the connection's own bytes: the HTTP/2 frame headers each side writes,
// and, inside the server's DATA frames, where each gRPC message ends.

const (
	frameHeaderLen   = 9
	frameData        = 0x0
	frameHeaders     = 0x1
	frameRSTStream   = 0x3
	flagEndStream    = 0x1
	clientPrefaceLen = 24 // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	messagePrefixLen = 5  // a gRPC message's compressed flag and length
)

// frameHandler hears the frames a frameScanner passes.
type frameHandler interface {
	frameStart(f *frameScanner)
	framePayload(f *frameScanner, p []byte)
	frameEnd(f *frameScanner)
}

// frameScanner follows the frames of one direction of a connection, fed
// the bytes in order in pieces of any size.
type frameScanner struct {
	skip   int // bytes to pass before the first frame (the client preface)
	hdr    [frameHeaderLen]byte
	have   int // bytes of hdr filled
	left   int // payload bytes of the current frame still to come
	typ    byte
	flags  byte
	stream uint32
}

func (f *frameScanner) scan(p []byte, h frameHandler) {
	for {
		if f.skip > 0 {
			n := min(f.skip, len(p))
			f.skip -= n
			p = p[n:]
			if f.skip > 0 {
				return
			}
		}
		if f.have < frameHeaderLen {
			if len(p) == 0 {
				return
			}
			n := copy(f.hdr[f.have:], p)
			f.have += n
			p = p[n:]
			if f.have < frameHeaderLen {
				return
			}
			f.left = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			f.typ, f.flags = f.hdr[3], f.hdr[4]
			f.stream = binary.BigEndian.Uint32(f.hdr[5:]) & 0x7fffffff
			h.frameStart(f)
		}
		if n := min(f.left, len(p)); n > 0 {
			h.framePayload(f, p[:n])
			f.left -= n
			p = p[n:]
		}
		if f.left > 0 {
			return
		}
		h.frameEnd(f)
		f.have = 0
	}
}

// endsStream reports whether the frame that just ended closes its stream
// for its sender.
func (f *frameScanner) endsStream() bool {
	switch f.typ {
	case frameData, frameHeaders:
		return f.flags&flagEndStream != 0
	case frameRSTStream:
		return true
	}
	return false
}

// messageScanner follows the gRPC messages of one stream's DATA payloads.
type messageScanner struct {
	hdr  [messagePrefixLen]byte
	have int
	left int
}

// feed reports how many messages end within p.
func (m *messageScanner) feed(p []byte) (ended int) {
	for {
		if m.have < messagePrefixLen {
			if len(p) == 0 {
				return ended
			}
			n := copy(m.hdr[m.have:], p)
			m.have += n
			p = p[n:]
			if m.have < messagePrefixLen {
				return ended
			}
			m.left = int(binary.BigEndian.Uint32(m.hdr[1:]))
		}
		n := min(m.left, len(p))
		m.left -= n
		p = p[n:]
		if m.left > 0 {
			return ended
		}
		ended++
		m.have = 0
	}
}

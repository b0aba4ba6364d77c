// Package wirecodec is the protobuf codec of every tidemark gRPC link, on
// buffers that are reused without being zeroed first.
//
// gRPC's own codec takes its buffers from a pool that clears each one's
// whole capacity on every Get, and rounds a message above 32 KiB up to a
// 1 MiB buffer: a follower's fetch answer of 40 KiB cleared a megabyte. On
// a broker leading a 1 KiB-record stream that clearing was a sixth of its
// CPU. Here the buffers come in powers of two and are handed out dirty,
// which is safe because every byte of one is written before it is read:
// Marshal writes exactly the message's size (and checks it did), and
// Unmarshal copies exactly the received bytes into it. Pool is for that use
// only: a buffer from it holds old bytes until its holder writes them.
package wirecodec

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Name is the codec's name: gRPC's content subtype for protobuf.
const Name = "proto"

// Codec implements encoding.CodecV2 for protobuf messages.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name reports "proto", so peers see the usual content type.
func (Codec) Name() string { return Name }

// Marshal encodes v; messages above gRPC's pooling threshold go into a
// buffer from Pool, which gRPC gives back once the bytes are written out.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("wirecodec: cannot marshal %T: not a proto.Message", v)
	}
	// UseCachedSize is safe right after Size, on a message nobody mutates
	// meanwhile (gRPC's own codec relies on the same).
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	bp := Pool.Get(size)
	out, err := opts.MarshalAppend((*bp)[:0], m)
	if err != nil {
		Pool.Put(bp)
		return nil, err
	}
	if len(out) != size || &out[0] != &(*bp)[0] {
		// Not the bytes the buffer was taken for (the message changed
		// size): send what was written, in its own allocation.
		Pool.Put(bp)
		return mem.BufferSlice{mem.SliceBuffer(out)}, nil
	}
	return mem.BufferSlice{mem.NewBuffer(bp, Pool)}, nil
}

// Unmarshal decodes data into v. A message that arrived in several pieces
// is first copied into one buffer from Pool, filled completely by the copy.
// proto.Unmarshal copies bytes fields out, so v never aliases the buffer.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("wirecodec: cannot unmarshal into %T: not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(Pool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// Pool hands out buffers whose old contents are not cleared: the holder
// must write every byte it later reads (MaterializeToBuffer does).
var Pool mem.BufferPool = &dirtyPool{}

const (
	minShift = 10 // 1 KiB: smaller messages are not pooled
	maxShift = 24 // 16 MiB: larger ones are allocated each time
	tiers    = maxShift - minShift + 1
)

// dirtyPool keeps buffers of each power of two from 1 KiB to 16 MiB.
type dirtyPool struct {
	tier [tiers]sync.Pool // tier[i] holds buffers of capacity 1 << (minShift+i)
}

// tierOf is the smallest tier whose buffers hold n bytes.
func tierOf(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minShift
}

func (p *dirtyPool) Get(n int) *[]byte {
	t := tierOf(n)
	if t >= tiers {
		b := make([]byte, n)
		return &b
	}
	if bp, ok := p.tier[t].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<(minShift+t))
	return &b
}

func (p *dirtyPool) Put(bp *[]byte) {
	c := cap(*bp)
	if c < 1<<minShift || c&(c-1) != 0 {
		return // not one of ours
	}
	if t := bits.Len(uint(c)) - 1 - minShift; t < tiers {
		p.tier[t].Put(bp)
	}
}

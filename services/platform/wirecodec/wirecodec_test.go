package wirecodec

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // gRPC's own codec, for the benchmark beside ours
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
)

func fetchResponse(size int) *brokerv1.FetchResponse {
	recs := make([]byte, size)
	for i := range recs {
		recs[i] = byte(i*7 + 3)
	}
	return &brokerv1.FetchResponse{HighWatermark: 42, LogStartOffset: 7, RecordBatches: recs, NextOffset: 99}
}

// poison fills pooled buffers of every tier up to 4 MiB (the tests' sizes)
// with 0xAA, so a byte the codec failed to write would show.
func poison() {
	for t := range tierOf(4<<20) + 1 {
		var held []*[]byte
		for range 4 {
			bp := Pool.Get(1 << (minShift + t))
			b := (*bp)[:cap(*bp)]
			for i := range b {
				b[i] = 0xAA
			}
			held = append(held, bp)
		}
		for _, bp := range held {
			Pool.Put(bp)
		}
	}
}

// split cuts b into pieces of n bytes, as gRPC hands a message that
// arrived in several HTTP/2 frames.
func split(b []byte, n int) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		out = append(out, mem.SliceBuffer(bytes.Clone(b[:k])))
		b = b[k:]
	}
	return out
}

// Every size around the pooling threshold and the tiers' edges encodes to
// exactly proto.Marshal's bytes on poisoned buffers, and decodes back from
// one piece or many.
func TestMarshalWritesEveryByteOnReusedBuffers(t *testing.T) {
	var c Codec
	var sizes []int
	for _, s := range []int{0, 1, 1000, 1 << 10, 4 << 10, 16 << 10, 40 << 10, 1 << 20, 3 << 20} {
		sizes = append(sizes, s, s+1, max(s-30, 0))
	}
	for _, size := range sizes {
		poison()
		m := fetchResponse(size)
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got := data.Materialize()
		if !bytes.Equal(got, want) {
			t.Fatalf("size %d: encoded %d bytes that differ from proto.Marshal's %d", size, len(got), len(want))
		}
		for _, piece := range []int{len(want) + 1, 16 << 10, 1000} {
			poison()
			var back brokerv1.FetchResponse
			if err := c.Unmarshal(split(want, piece), &back); err != nil {
				t.Fatalf("size %d in pieces of %d: %v", size, piece, err)
			}
			if !proto.Equal(&back, m) {
				t.Fatalf("size %d in pieces of %d: decoded a different message", size, piece)
			}
		}
		data.Free()
	}
}

// A decoded message owns its bytes: the buffer it was decoded from goes
// back to the pool and is reused, and the message does not change.
func TestDecodedMessagesDoNotAliasThePool(t *testing.T) {
	var c Codec
	m := fetchResponse(20 << 10)
	want, _ := proto.Marshal(m)
	var back brokerv1.FetchResponse
	if err := c.Unmarshal(split(want, 16<<10), &back); err != nil {
		t.Fatal(err)
	}
	poison()
	if !proto.Equal(&back, m) {
		t.Fatal("the decoded message changed when its pool buffers were reused")
	}
}

func TestNonProtoValuesAreRefused(t *testing.T) {
	var c Codec
	if _, err := c.Marshal("text"); err == nil {
		t.Fatal("marshalled a string")
	}
	var s string
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{1})}, &s); err == nil {
		t.Fatal("unmarshalled into a string")
	}
}

func TestPoolTiers(t *testing.T) {
	for _, tc := range []struct{ n, cap int }{{1, 1 << 10}, {1 << 10, 1 << 10}, {1<<10 + 1, 2 << 10}, {40 << 10, 64 << 10}, {1 << 24, 1 << 24}} {
		bp := Pool.Get(tc.n)
		if len(*bp) != tc.n || cap(*bp) != tc.cap {
			t.Fatalf("Get(%d): len %d cap %d, want cap %d", tc.n, len(*bp), cap(*bp), tc.cap)
		}
		Pool.Put(bp)
	}
	if bp := Pool.Get(1<<24 + 1); cap(*bp) != 1<<24+1 {
		t.Fatalf("a buffer above the largest tier has cap %d", cap(*bp))
	}
	odd := make([]byte, 3000)
	Pool.Put(&odd) // not a tier's size: dropped, never handed out
	for range 100 {
		if bp := Pool.Get(3000); cap(*bp) != 4<<10 {
			t.Fatalf("Get(3000) gave cap %d", cap(*bp))
		}
	}
}

// BenchmarkMarshal encodes a fetch answer of each size with this codec and
// with gRPC's, side by side (make bench): gRPC's clears its pooled buffer,
// a megabyte for anything above 32 KiB.
func BenchmarkMarshal(b *testing.B) {
	codecs := []struct {
		name string
		c    encoding.CodecV2
	}{{"tidemark", Codec{}}, {"grpc", encoding.GetCodecV2("proto")}}
	for _, size := range []int{4 << 10, 17 << 10, 40 << 10, 200 << 10} {
		m := fetchResponse(size)
		for _, cd := range codecs {
			b.Run(cd.name+"/"+byteSize(size), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					data, err := cd.c.Marshal(m)
					if err != nil {
						b.Fatal(err)
					}
					data.Free()
				}
			})
		}
	}
}

// BenchmarkUnmarshal decodes a 40 KiB answer that arrived in 16 KiB frames.
func BenchmarkUnmarshal(b *testing.B) {
	want, _ := proto.Marshal(fetchResponse(40 << 10))
	in := split(want, 16<<10)
	for _, cd := range []struct {
		name string
		c    encoding.CodecV2
	}{{"tidemark", Codec{}}, {"grpc", encoding.GetCodecV2("proto")}} {
		b.Run(cd.name, func(b *testing.B) {
			b.SetBytes(int64(len(want)))
			for b.Loop() {
				var m brokerv1.FetchResponse
				if err := cd.c.Unmarshal(in, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func byteSize(n int) string {
	return map[int]string{4 << 10: "4KiB", 17 << 10: "17KiB", 40 << 10: "40KiB", 200 << 10: "200KiB"}[n]
}

package grpcserver

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkAnswerBudget is what the per-connection answer budget costs a
// call over a real loopback connection: the same charged call with no
// budget and with the default one (every frame followed, every answer
// charged and freed as written), side by side.
func BenchmarkAnswerBudget(b *testing.B) {
	for _, size := range []int{128, 64 << 10} {
		for _, budget := range []int{0, DefaultAnswerBytesPerConnection} {
			b.Run(fmt.Sprintf("answer=%dB/budget=%d", size, budget), func(b *testing.B) {
				_, _, addr := startAnswering(b, budget)
				cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				defer cc.Close()
				in := wrapperspb.UInt32(uint32(size))
				out := &wrapperspb.BytesValue{}
				ctx := context.Background()
				if err := cc.Invoke(ctx, "/test.Answers/Get", in, out); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(size))
				b.ResetTimer()
				for b.Loop() {
					if err := cc.Invoke(ctx, "/test.Answers/Get", in, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

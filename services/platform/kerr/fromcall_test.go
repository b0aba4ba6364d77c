package kerr

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FromCall names every way a call can fail by the Kafka code a client acts
// on: the server's own error, the caller's ended context, the transport.
func TestFromCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, None},
		{"the server's error, wrapped", fmt.Errorf("produce: %w", New(NotLeaderOrFollower, "moved")), NotLeaderOrFollower},
		{"the server's error over gRPC", ToStatus(New(FencedLeaderEpoch, "old")).Err(), FencedLeaderEpoch},
		{"the caller's deadline", context.DeadlineExceeded, RequestTimedOut},
		{"the caller cancelled", ctx.Err(), RequestTimedOut},
		{"the transport cut the call off", status.Error(codes.Canceled, "connection closing"), NetworkException},
		{"unreachable", status.Error(codes.Unavailable, "connection refused"), NetworkException},
	} {
		got := FromCall(tc.err)
		if tc.want == None {
			if got != nil {
				t.Errorf("%s: %v, want nil", tc.name, got)
			}
			continue
		}
		if got == nil || got.Code != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
}

package kafkaapi

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/identity"
)

// gatedGroups holds every FindCoordinator until gate is closed.
type gatedGroups struct{ gate chan struct{} }

func (g gatedGroups) APIs() map[int16]VersionRange {
	return map[int16]VersionRange{int16(kmsg.FindCoordinator): {0, 4}}
}

func (g gatedGroups) Handle(ctx context.Context, _ identity.Principal, req kmsg.Request) kmsg.Response {
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	return req.ResponseKind()
}

// The requests a connection has read and not yet answered hold at most
// about socket.request.max.bytes: past it the connection is read no
// further until one is answered, then the rest are read and answered in
// order. Before, it read up to max.in.flight requests of up to
// socket.request.max.bytes each while they waited.
func TestRequestsReadAheadAreBoundedPerConnection(t *testing.T) {
	const maxRequest = 1 << 20
	g := gatedGroups{gate: make(chan struct{})}
	s := New(Options{Extension: g, Limits: Limits{MaxRequestBytes: maxRequest}})
	server, client := net.Pipe() // a write ends only once the broker has read it
	c := s.newConn(server, Listener{})
	served := make(chan struct{})
	go func() { defer close(served); c.serve() }()
	t.Cleanup(func() { client.Close(); <-served })

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(2)
	// Two are over the bound, one is not: each counts its body and what
	// decoding it may allocate.
	fc.CoordinatorKey = strings.Repeat("g", maxRequest*3/4/(decodeAmplification+1))
	frames := [][]byte{frame(fc, 1), frame(fc, 2), frame(fc, 3)}
	_ = client.SetWriteDeadline(time.Now().Add(10 * time.Second))
	for _, f := range frames[:2] {
		if _, err := client.Write(f); err != nil {
			t.Fatalf("the first two requests were not read: %v", err)
		}
	}
	_ = client.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := client.Write(frames[2]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("third request: %v; want it unread while the two before it hold %d bytes", err, 2*(decodeAmplification+1)*len(frames[0]))
	}

	close(g.gate)
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	wrote := make(chan error, 1)
	go func() { _, err := client.Write(frames[2]); wrote <- err }()
	for _, want := range []int32{1, 2, 3} {
		if corr, _, err := readAnswer(t, client); err != nil || corr != want {
			t.Fatalf("answer %d: correlation %d, %v", want, corr, err)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatalf("third request once the first were answered: %v", err)
	}
}

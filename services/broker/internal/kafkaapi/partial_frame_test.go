package kafkaapi

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/identity"
)

// slowGroups answers FindCoordinator after a delay, so a request stays in
// flight on the connection.
type slowGroups struct{ delay time.Duration }

func (g slowGroups) APIs() map[int16]VersionRange {
	return map[int16]VersionRange{int16(kmsg.FindCoordinator): {0, 4}}
}

func (g slowGroups) Handle(_ context.Context, _ identity.Principal, req kmsg.Request) kmsg.Response {
	time.Sleep(g.delay)
	return req.ResponseKind()
}

// A request frame whose first bytes arrive before an idle deadline passes
// while another request is in flight, and whose rest arrives after it, is
// still read as one frame: the bytes already read must not be dropped.
func TestPartialSizeAcrossIdleDeadlineKeepsFraming(t *testing.T) {
	s := New(Options{Extension: slowGroups{delay: 1500 * time.Millisecond},
		Limits: Limits{IdleTimeout: 300 * time.Millisecond, MaxRequestBytes: 1 << 20}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	c := dial(t, lis.Addr().String())
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(2)
	fc.CoordinatorKey = "g"
	if _, err := c.Write(frame(fc, 1)); err != nil {
		t.Fatal(err)
	}
	next := frame(apiVersions(0), 2)
	if _, err := c.Write(next[:2]); err != nil { // half the size field
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond) // past the idle deadline, FindCoordinator still in flight
	if _, err := c.Write(next[2:]); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int32{1, 2} {
		corr, _, err := readAnswer(t, c)
		if err != nil || corr != want {
			t.Fatalf("answer %d: correlation %d, %v (the split frame was misread)", want, corr, err)
		}
	}
}

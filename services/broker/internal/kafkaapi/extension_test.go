package kafkaapi

import (
	"context"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/identity"
)

// groups stands in for a group coordinator plugged into the listener.
type groups struct{ seen chan identity.Principal }

func (g groups) APIs() map[int16]VersionRange {
	return map[int16]VersionRange{int16(kmsg.FindCoordinator): {0, 4}, int16(kmsg.Produce): {0, 99}}
}

func (g groups) Handle(_ context.Context, p identity.Principal, req kmsg.Request) kmsg.Response {
	g.seen <- p
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.NodeID = 42
	return resp
}

// An Extension's APIs are advertised and answered by it, with the caller's
// principal; it cannot take over an API the listener serves itself.
func TestExtensionServesItsAPIs(t *testing.T) {
	g := groups{seen: make(chan identity.Principal, 1)}
	s := New(Options{Extension: g})
	if vr := s.table[int16(kmsg.Produce)].versions; vr.Max != 11 {
		t.Fatalf("the extension replaced Produce's versions: %+v", vr)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Close)
	c := dial(t, lis.Addr().String())

	if _, err := c.Write(frame(apiVersions(3), 1)); err != nil {
		t.Fatal(err)
	}
	_, body, err := readAnswer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3)
	if err := av.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, k := range av.ApiKeys {
		advertised = advertised || k.ApiKey == int16(kmsg.FindCoordinator) && k.MaxVersion == 4
	}
	if !advertised {
		t.Fatal("FindCoordinator not advertised with the extension plugged in")
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey = "group"
	if _, err := c.Write(frame(fc, 2)); err != nil {
		t.Fatal(err)
	}
	_, body, err = readAnswer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(body[1:]); err != nil { // v3 is flexible: an empty tag section leads
		t.Fatal(err)
	}
	if resp.NodeID != 42 {
		t.Fatalf("answered with node %d, not by the extension", resp.NodeID)
	}
	if p := <-g.seen; p != identity.Anon {
		t.Fatalf("principal %+v over plaintext, want anonymous", p)
	}
}

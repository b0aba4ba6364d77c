package gateway

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/kerr"
)

// A fault call to a broker the metadata still lists but that is gone (a
// refused connection) answers BROKER_NOT_AVAILABLE naming the broker; an
// answer the broker gave passes as it is.
func TestAFaultOnABrokerThatDoesNotAnswerNamesIt(t *testing.T) {
	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
	err := unreachable(3, refused)
	if ke := kerr.As(err); ke.Code != kerr.BrokerNotAvailable || ke.Field != "broker_id" {
		t.Fatalf("a refused connection became %v, want BROKER_NOT_AVAILABLE naming broker_id", err)
	}
	answered := kerr.New(kerr.PolicyViolation, "fault injection is off")
	if got := unreachable(3, answered); kerr.CodeOf(got) != kerr.PolicyViolation {
		t.Fatalf("the broker's own answer became %v", got)
	}
	if unreachable(3, nil) != nil {
		t.Fatal("no error became one")
	}
}

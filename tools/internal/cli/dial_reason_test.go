package cli

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A plaintext dial to a TLS node ends in either of two errors, depending on
// whether the node's close or its bytes arrive first; both say what to change.
func TestDialReasonNamesPlaintextOnATLSNode(t *testing.T) {
	reset := status.Error(codes.Unavailable, "connection error: desc = \"error reading server preface: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer\"")
	preface := status.Error(codes.Unavailable, "connection error: desc = \"error reading server preface: http2: frame too large\"")
	for _, err := range []error{reset, preface} {
		if got := dialReason(err, true, "3s"); !strings.Contains(got, "drop --plaintext") {
			t.Errorf("plaintext, %v: %q, want the TLS hint", err, got)
		}
	}
	if got := dialReason(reset, false, "3s"); got != "connection reset" {
		t.Errorf("TLS dial reset: %q, want just the reset", got)
	}
}

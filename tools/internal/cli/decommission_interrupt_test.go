package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
)

// decommission --wait stopped by Ctrl-C says it was interrupted, as a perf
// run cut short does; it said REQUEST_TIMED_OUT, as if --command-timeout
// had run out. The timeout still says REQUEST_TIMED_OUT. Both exit 1.
func TestDecommissionWaitInterruptedSaysSo(t *testing.T) {
	interrupted, cancel := context.WithCancel(context.Background())
	op, stop := context.WithTimeout(interrupted, time.Hour) // as withAdmin's --command-timeout
	defer stop()
	cancel()
	err := stillHolding(op, 1500*time.Millisecond, 3, 4, 2)
	if err == nil || !strings.HasPrefix(err.Error(), "interrupted after 1.5s") || kerr.As(err).Code == kerr.RequestTimedOut ||
		!strings.Contains(err.Error(), "broker 3 still holds 4 replicas") {
		t.Errorf("interrupted: %v, want it to say it was interrupted and what the broker still holds", err)
	}
	if err := stillHolding(op, 0, 3, -1, -1); !strings.HasPrefix(err.Error(), "interrupted") || strings.Contains(err.Error(), "-1") {
		t.Errorf("interrupted before counting: %v, want it to say it was interrupted, with no count", err)
	}

	timedOut, stop2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop2()
	err = stillHolding(timedOut, time.Second, 3, 4, 2)
	if kerr.As(err).Code != kerr.RequestTimedOut || strings.Contains(err.Error(), "interrupted") {
		t.Errorf("--command-timeout ran out: %v, want REQUEST_TIMED_OUT", err)
	}

	for _, err := range []error{stillHolding(op, 0, 3, 4, 2), stillHolding(timedOut, 0, 3, 4, 2)} {
		var ue usageError
		if errors.As(err, &ue) {
			t.Errorf("%v: a usage error (exit 2), want exit 1", err)
		}
	}
}

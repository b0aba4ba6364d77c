package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSequenceStopsInOrderAndJoinsErrors(t *testing.T) {
	var order []string
	step := func(name string, err error) Stopper {
		return StopFunc(func(context.Context) error { order = append(order, name); return err })
	}
	boom := errors.New("boom")
	err := Sequence(step("server", nil), nil, step("replication", boom), step("logs", nil)).Stop(context.Background())
	if strings.Join(order, ",") != "server,replication,logs" {
		t.Fatalf("order %v", order)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("error %v lost the failing step's error", err)
	}
}

func TestWaitAndStopOnSignalOrFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := false
	s := StopFunc(func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("stop runs without a deadline")
		}
		stopped = true
		return nil
	})
	cancel() // the signal
	if err := WaitAndStop(ctx, nil, s, nil, time.Second); err != nil || !stopped {
		t.Fatalf("after a signal: err %v, stopped %v", err, stopped)
	}

	failed := make(chan error, 1)
	failed <- errors.New("listener died")
	stopped = false
	err := WaitAndStop(context.Background(), nil, s, failed, time.Second)
	if err == nil || !strings.Contains(err.Error(), "listener died") || !stopped {
		t.Fatalf("after a failure: err %v, stopped %v", err, stopped)
	}
}

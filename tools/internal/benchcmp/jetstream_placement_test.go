package benchcmp

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The refusal seen in CI on a cluster 1.4 s old, as nats.go words it.
const refusedPlacement = "nats: API error: code=400 err_code=10005 description=no suitable peers for placement, peer offline"

func TestStreamCreationWaitsOutARefusedPlacement(t *testing.T) {
	var log bytes.Buffer
	calls := 0
	err := createWhilePlacementSettles(context.Background(), &log, "stream s", func() error {
		if calls++; calls < 3 {
			return errors.New(refusedPlacement)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want success on the third", err, calls)
	}
	if n := strings.Count(log.String(), "refused"); n != 2 {
		t.Fatalf("want both refusals in the log, got:\n%s", log.String())
	}
}

func TestStreamCreationStopsOnOtherErrors(t *testing.T) {
	calls := 0
	err := createWhilePlacementSettles(context.Background(), &bytes.Buffer{}, "stream s", func() error {
		calls++
		return errors.New("nats: API error: code=400 err_code=10058 description=stream name already in use")
	})
	if err == nil || calls != 1 {
		t.Fatalf("err %v after %d calls, want the first error back at once", err, calls)
	}
}

func TestStreamCreationGivesUpWhenTheRunEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := createWhilePlacementSettles(ctx, &bytes.Buffer{}, "stream s", func() error { return errors.New(refusedPlacement) })
	if err == nil || !strings.Contains(err.Error(), "no suitable peers") {
		t.Fatalf("want the refusal back, got %v", err)
	}
	if d := time.Since(start); d > placementSettle/2 {
		t.Fatalf("kept retrying %v after the run's context ended", d)
	}
}

func TestPlacementRefusedKnowsNatsBenchsWording(t *testing.T) {
	for msg, want := range map[string]bool{
		refusedPlacement: true,
		"nats: error: could not create the stream. The stream may already exist or it timed out": true,
		"nats: error: publishing: publishing synchronously: nats: no response from stream":       true,
		"nats: no responders available for request":                                              false,
		"": false,
	} {
		if placementRefused(msg) != want {
			t.Errorf("placementRefused(%q) = %v", msg, !want)
		}
	}
}

package retry

import (
	"context"
	"testing"
	"time"
)

func TestDelayDoublesUpToMaxWithJitter(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for range 200 {
			d := b.Delay(attempt)
			if d < want*8/10 || d >= want*12/10 {
				t.Fatalf("attempt %d: %v, want within ±20%% of %v", attempt, d, want)
			}
		}
	}
	// Jitter: callers that failed together spread out.
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[b.Delay(3)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 delays took only %d values: no jitter", len(seen))
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on a cancelled context reported a full pause")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a short pause did not pass")
	}
	if Sleep(ctx, 0) {
		t.Fatal("a zero pause on a cancelled context reported success")
	}
}

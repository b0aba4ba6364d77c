package logging

import (
	"testing"
	"time"
)

// One line per key per interval; the next one names those held back, and
// another key is not held back by the first.
func TestLimiterLetsOneLinePerKeyPerInterval(t *testing.T) {
	l := NewLimiter(10 * time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	if n, ok := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("first line: %d, %v; want 0, true", n, ok)
	}
	for range 3 {
		if _, ok := l.Allow("a"); ok {
			t.Fatal("a second line within the interval was let through")
		}
	}
	if _, ok := l.Allow("b"); !ok {
		t.Fatal("another key was held back")
	}
	now = now.Add(10 * time.Second)
	if n, ok := l.Allow("a"); !ok || n != 3 {
		t.Fatalf("after the interval: %d, %v; want 3, true", n, ok)
	}
}

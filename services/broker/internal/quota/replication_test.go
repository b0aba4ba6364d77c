package quota

import (
	"testing"
	"time"
)

func TestReplicationThrottleMeasuresOverItsSamples(t *testing.T) {
	now := time.Unix(1000, 0)
	q := NewReplication(func() time.Time { return now })
	q.Record(1 << 20)
	if q.Exceeded() {
		t.Fatal("no limit set, yet exceeded")
	}
	q.Set(1000, 3, time.Second)
	// Changing the samples starts the measure over.
	if q.Exceeded() || q.Rate() != 0 {
		t.Fatalf("rate %v after new samples", q.Rate())
	}
	q.Record(1500) // over at least 2 windows: 750 B/s
	if q.Exceeded() {
		t.Fatalf("750 B/s against 1000: exceeded (rate %v)", q.Rate())
	}
	now = now.Add(500 * time.Millisecond)
	q.Record(1100) // 2600 B over 2.5 s: the time into the current window counts
	if !q.Exceeded() {
		t.Fatalf("1040 B/s against 1000: not exceeded (rate %v)", q.Rate())
	}
	now = now.Add(4 * time.Second) // every sample aged out
	if q.Exceeded() {
		t.Fatalf("still exceeded after the window (rate %v)", q.Rate())
	}
	q.Set(Unlimited, 3, time.Second)
	q.Record(1 << 30)
	if q.Exceeded() {
		t.Fatal("unlimited, yet exceeded")
	}
}

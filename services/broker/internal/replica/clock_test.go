package replica

import (
	"sort"
	"sync"
	"testing"
	"time"
)

// manualClock is the tests' Clock: time moves only when a test calls
// Advance, which fires every timer that falls due, in deadline order. Tests
// synchronise with the manager's goroutines through the timers they arm:
// WaitTimer blocks until a goroutine has armed a timer of a given duration,
// which it does only once it is parked.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{}
	seq    int
}

type manualTimer struct {
	c   *manualClock
	at  time.Time
	d   time.Duration
	seq int
	ch  chan time.Time
	f   func()
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), timers: map[*manualTimer]struct{}{}}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTimer(d time.Duration) Timer {
	return c.arm(d, nil)
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) Timer {
	return c.arm(d, f)
}

func (c *manualClock) arm(d time.Duration, f func()) *manualTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{c: c, at: c.now.Add(d), d: d, seq: c.seq, f: f}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	if d <= 0 {
		t.fire(c.now)
		return t
	}
	c.timers[t] = struct{}{}
	return t
}

// fire delivers like a real timer: a send that never blocks, or f in its
// own goroutine.
func (t *manualTimer) fire(now time.Time) {
	if t.f != nil {
		go t.f()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, pending := t.c.timers[t]
	delete(t.c.timers, t)
	return pending
}

// Advance moves time forward by d and fires the timers that fall due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*manualTimer
	for t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
			delete(c.timers, t)
		}
	}
	now := c.now
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool {
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].seq < due[j].seq
	})
	for _, t := range due {
		t.fire(now)
	}
}

// pending counts armed timers of duration d.
func (c *manualClock) pending(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for t := range c.timers {
		if t.d == d {
			n++
		}
	}
	return n
}

// WaitTimer waits (in real time, bounded) until at least n timers of
// duration d are armed: the goroutines that arm them are parked.
func (c *manualClock) WaitTimer(t testing.TB, d time.Duration, n int) {
	t.Helper()
	waitFor(t, "a timer of "+d.String()+" to be armed", func() bool { return c.pending(d) >= n })
}

// waitFor polls cond until it holds; it fails the test after 10 s of real
// time. It only waits for other goroutines to get somewhere: it never
// stands in for the passage of the manager's time.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

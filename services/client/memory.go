package client

import (
	"context"
	"sync"
	"sync/atomic"
)

// memLimiter is buffer.memory: a byte budget for records handed to the
// producer and not yet completed. Waiters are served in arrival order so
// that a large record is not starved by small ones.
type memLimiter struct {
	mu      sync.Mutex // guards used and waiters
	limit   int
	used    int
	waiters []*memWaiter
	// waiting is len(waiters), readable without mu: the partition
	// goroutines ask it on every step, under their own locks.
	waiting atomic.Int32
	// onExhausted runs, without locks, when a record starts waiting and
	// none was: the budget is spent, so open batches should go now rather
	// than wait for linger.ms (Kafka's accumulator: a batch is ready when
	// the buffer pool has waiters).
	onExhausted func()
}

// exhausted reports whether a record is waiting for room.
func (m *memLimiter) exhausted() bool { return m.waiting.Load() > 0 }

type memWaiter struct {
	n       int
	granted bool
	ready   chan struct{}
}

func newMemLimiter(limit int) *memLimiter { return &memLimiter{limit: limit} }

// tryAcquire takes n bytes if they are free now.
func (m *memLimiter) tryAcquire(n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.waiters) == 0 && m.used+n <= m.limit {
		m.used += n
		return true
	}
	return false
}

// acquire takes n bytes, blocking until they are free or ctx ends.
func (m *memLimiter) acquire(ctx context.Context, n int) error {
	m.mu.Lock()
	if len(m.waiters) == 0 && m.used+n <= m.limit {
		m.used += n
		m.mu.Unlock()
		return nil
	}
	w := &memWaiter{n: n, ready: make(chan struct{})}
	m.waiters = append(m.waiters, w)
	m.waiting.Store(int32(len(m.waiters)))
	first := len(m.waiters) == 1
	m.mu.Unlock()
	if first && m.onExhausted != nil {
		m.onExhausted()
	}
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.granted {
		// Granted just as ctx ended: keep it rather than lose the race.
		return nil
	}
	for i, x := range m.waiters {
		if x == w {
			m.waiters = append(m.waiters[:i], m.waiters[i+1:]...)
			m.waiting.Store(int32(len(m.waiters)))
			break
		}
	}
	m.grantLocked()
	return ctx.Err()
}

// release returns n bytes and wakes the waiters that now fit.
func (m *memLimiter) release(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used -= n
	m.grantLocked()
}

func (m *memLimiter) grantLocked() {
	for len(m.waiters) > 0 {
		w := m.waiters[0]
		if m.used+w.n > m.limit {
			return
		}
		m.used += w.n
		w.granted = true
		close(w.ready)
		m.waiters = m.waiters[1:]
		m.waiting.Store(int32(len(m.waiters)))
	}
}

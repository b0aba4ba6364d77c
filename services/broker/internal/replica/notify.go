package replica

import (
	"sync"

	"tidemark.io/services/broker/internal/lockorder"
)

// waiter is one parked request (a delayed fetch or produce) waiting for
// something to change on any of the partitions it watches. Kafka keeps such
// requests in purgatories keyed by partition; here each partition holds the
// set of waiters watching it, and a change pokes each one without blocking.
type waiter struct {
	ch chan struct{}
}

// newWaiter returns a waiter from the pool (every produce and fetch that
// parks takes one); releaseWaiter gives it back once it is removed from
// every set it was added to, so no poke can reach it any more.
func newWaiter() *waiter { return waiterPool.Get().(*waiter) }

func releaseWaiter(w *waiter) {
	select {
	case <-w.ch: // a poke it did not wait for
	default:
	}
	waiterPool.Put(w)
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan struct{}, 1)} }}

// poke wakes the waiter; extra pokes before it runs are folded into one.
func (w *waiter) poke() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// watchers is a partition's set of parked waiters. Its own mutex keeps
// registration off the partition lock, so waking never nests locks.
type watchers struct {
	mu  lockorder.Mutex[lockorder.Leaf]
	set map[*waiter]struct{}
}

func (ws *watchers) add(w *waiter) {
	ws.mu.Lock()
	if ws.set == nil {
		ws.set = map[*waiter]struct{}{}
	}
	ws.set[w] = struct{}{}
	ws.mu.Unlock()
}

func (ws *watchers) remove(w *waiter) {
	ws.mu.Lock()
	delete(ws.set, w)
	ws.mu.Unlock()
}

// wakeAll pokes every waiter; they re-check their own conditions.
func (ws *watchers) wakeAll() {
	ws.mu.Lock()
	for w := range ws.set {
		w.poke()
	}
	ws.mu.Unlock()
}

// size is the number of parked waiters, for the purgatory-size metric.
func (ws *watchers) size() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.set)
}

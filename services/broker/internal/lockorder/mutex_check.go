//go:build lockcheck

package lockorder

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// Enabled reports whether this build checks the lock order.
const Enabled = true

// Mutex is a sync.Mutex of class C whose acquisitions are checked.
type Mutex[C Class] struct{ mu sync.Mutex }

func (m *Mutex[C]) Lock() {
	var c C
	acquire(m, c.info())
	m.mu.Lock()
}

func (m *Mutex[C]) Unlock() {
	release(m)
	m.mu.Unlock()
}

// RWMutex is a sync.RWMutex of class C whose acquisitions, shared ones
// included, are checked.
type RWMutex[C Class] struct{ mu sync.RWMutex }

func (m *RWMutex[C]) Lock() {
	var c C
	acquire(m, c.info())
	m.mu.Lock()
}

func (m *RWMutex[C]) Unlock() {
	release(m)
	m.mu.Unlock()
}

func (m *RWMutex[C]) RLock() {
	var c C
	acquire(m, c.info())
	m.mu.RLock()
}

func (m *RWMutex[C]) RUnlock() {
	release(m)
	m.mu.RUnlock()
}

type hold struct {
	lock any
	class
}

// violation reports an out-of-order acquisition. It ends the process rather
// than panicking: the gRPC server's recovery interceptor would turn a panic
// in a handler into an Internal error that a test might even expect. The
// package's own tests replace it with a panic.
var violation = func(msg string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, false)]
	fmt.Fprintf(os.Stderr, "%s\n\n%s\n", msg, buf)
	os.Exit(3)
}

var (
	heldMu sync.Mutex
	held   = map[int64][]hold{} // by goroutine id
)

// acquire records that the calling goroutine takes lock, panicking if it
// holds a lock whose rank is not smaller.
func acquire(lock any, c class) {
	g := goid()
	heldMu.Lock()
	for _, h := range held[g] {
		if h.rank >= c.rank {
			heldMu.Unlock()
			violation(fmt.Sprintf("lock order: goroutine %d takes %s (rank %d) while holding %s (rank %d); see services/broker/LOCKORDER.md",
				g, c.name, c.rank, h.name, h.rank))
		}
	}
	held[g] = append(held[g], hold{lock, c})
	heldMu.Unlock()
}

// release forgets lock, held by the calling goroutine or, for a lock
// unlocked by another goroutine than the one that took it, by any.
func release(lock any) {
	g := goid()
	heldMu.Lock()
	defer heldMu.Unlock()
	if forget(g, lock) {
		return
	}
	for other := range held {
		if forget(other, lock) {
			return
		}
	}
	violation("lock order: unlock of a lock no goroutine holds")
}

func forget(g int64, lock any) bool {
	hs := held[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].lock == lock {
			hs = append(hs[:i], hs[i+1:]...)
			if len(hs) == 0 {
				delete(held, g)
			} else {
				held[g] = hs
			}
			return true
		}
	}
	return false
}

// goid parses the current goroutine's id from its stack header
// ("goroutine 42 [running]:"); slow, which is why only this build does it.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		panic("lock order: cannot read the goroutine id")
	}
	return id
}

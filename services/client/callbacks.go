package client

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
)

// callbackGoroutines are the goroutines a consumer starts to run the
// application's CommitAsync callbacks. Close and Abandon wait for them to
// end, but for the one they are called from: a callback may close its own
// consumer (as a Java consumer's commit callback may, on the thread it runs
// on), and waiting for itself would never end. Go gives a goroutine no
// identity to compare, so each is known by the id its stack header names.
type callbackGoroutines struct {
	mu       sync.Mutex
	starting int            // started, not yet running (their ids unknown)
	running  map[uint64]int // goroutine id → callbacks it is inside
	changed  chan struct{}  // closed when one ends; nil without waiters
}

// start runs f on a goroutine of its own, counted from now on.
func (g *callbackGoroutines) start(f func()) {
	g.mu.Lock()
	g.starting++
	g.mu.Unlock()
	go func() {
		id := goroutineID()
		g.mu.Lock()
		g.starting--
		if g.running == nil {
			g.running = map[uint64]int{}
		}
		g.running[id]++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			if g.running[id]--; g.running[id] == 0 {
				delete(g.running, id)
			}
			if g.changed != nil {
				close(g.changed)
				g.changed = nil
			}
			g.mu.Unlock()
		}()
		f()
	}()
}

// waitOthers waits until every counted goroutine but the caller's has
// ended. Nothing may be started meanwhile (the consumer has stopped).
func (g *callbackGoroutines) waitOthers() {
	self := uint64(0)
	for first := true; ; first = false {
		g.mu.Lock()
		if first && len(g.running) > 0 {
			self = goroutineID()
		}
		others := g.starting + len(g.running)
		if g.running[self] > 0 {
			others--
		}
		if others == 0 {
			g.mu.Unlock()
			return
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		changed := g.changed
		g.mu.Unlock()
		<-changed
	}
}

// goroutineID is the running goroutine's id, from the header of its stack
// ("goroutine 42 [running]:"); 0 if it cannot be read.
func goroutineID() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := bytes.Fields(buf[:n])
	if len(f) < 2 || string(f[0]) != "goroutine" {
		return 0
	}
	id, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return id
}

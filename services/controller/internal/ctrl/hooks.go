package ctrl

import (
	"context"
	"sync"
)

// gate lets tests hold every sender of the term, as if the controller's
// outgoing requests were stuck in flight. It is open normally.
type gate struct {
	mu     sync.Mutex
	closed chan struct{} // nil when open
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == nil {
		g.closed = make(chan struct{})
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

// HoldSendersForTest stops every sender of the term before its next attempt
// until the returned release is called: the controller's requests stay in
// flight, as in a stalled process.
func (a *Active) HoldSendersForTest() (release func()) {
	a.gate.hold()
	return a.gate.open
}

// StallForTest blocks the loop until release is called, as if the process
// were paused; events queue up behind it in order. It returns once the loop
// is blocked, or false if the term has ended.
func (a *Active) StallForTest() (release func(), ok bool) {
	stalled, resume := make(chan struct{}), make(chan struct{})
	if !a.post(func() { close(stalled); <-resume }) {
		return func() {}, false
	}
	select {
	case <-stalled:
	case <-a.quit:
		return func() {}, false
	}
	var once sync.Once
	return func() { once.Do(func() { close(resume) }) }, true
}

// QueuedCallsForTest is how many callers wait for a request queued on the
// loop (a stalled loop leaves them queued).
func (a *Active) QueuedCallsForTest() int { return int(a.queuedCalls.Load()) }

// WatchersForTest is how many WatchCluster subscribers the loop wakes; it
// waits for the loop.
func (a *Active) WatchersForTest() int {
	n := -1
	_ = a.call(context.Background(), func() error { n = len(a.subs); return nil })
	return n
}

package client

import (
	"sync"
	"testing"
	"time"
)

func TestGoroutineIDsTellGoroutinesApart(t *testing.T) {
	self := goroutineID()
	if self == 0 {
		t.Fatal("the running goroutine's id could not be read")
	}
	if again := goroutineID(); again != self {
		t.Fatalf("the same goroutine read as %d then %d", self, again)
	}
	other := make(chan uint64)
	go func() { other <- goroutineID() }()
	if id := <-other; id == 0 || id == self {
		t.Fatalf("another goroutine read as %d (this one %d)", id, self)
	}
}

// waitOthers waits for every callback goroutine but the one it is called
// from: called from a callback, it returns once the others have ended,
// without waiting for itself.
func TestCallbackGoroutinesWaitForAllButTheCaller(t *testing.T) {
	var g callbackGoroutines
	release := make(chan struct{})
	var slowEnded sync.WaitGroup
	slowEnded.Add(1)
	g.start(func() {
		defer slowEnded.Done()
		<-release
	})
	waited := make(chan struct{})
	g.start(func() {
		g.waitOthers() // from a callback: waits for the slow one only
		close(waited)
	})
	select {
	case <-waited:
		t.Fatal("waitOthers in a callback returned while another callback still ran")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("waitOthers in a callback never returned: it waited for itself")
	}
	slowEnded.Wait()
	outside := make(chan struct{})
	go func() { g.waitOthers(); close(outside) }()
	select {
	case <-outside:
	case <-time.After(10 * time.Second):
		t.Fatal("waitOthers outside any callback never returned once they had all ended")
	}
}

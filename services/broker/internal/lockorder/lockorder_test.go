//go:build lockcheck

package lockorder

import (
	"strings"
	"sync"
	"testing"
)

func init() { violation = func(msg string) { panic(msg) } }

// mustPanic runs f and returns its panic message.
func mustPanic(t *testing.T, f func()) string {
	t.Helper()
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg, _ = r.(string)
			}
		}()
		f()
	}()
	if msg == "" {
		t.Fatal("no panic")
	}
	return msg
}

func TestInOrderAcquisitionsPass(t *testing.T) {
	var m Mutex[ReplicaManager]
	var r Mutex[Replica]
	var w Mutex[LogWriter]
	var files RWMutex[LogFiles]
	m.Lock()
	r.Lock()
	w.Lock()
	files.RLock()
	files.RUnlock()
	w.Unlock()
	r.Unlock()
	m.Unlock()
	// Released in another order than taken: still fine.
	r.Lock()
	w.Lock()
	r.Unlock()
	w.Unlock()
	heldMu.Lock()
	defer heldMu.Unlock()
	if len(held) != 0 {
		t.Fatalf("holds left behind: %v", held)
	}
}

func TestOutOfOrderAcquisitionPanicsNamingBothLocks(t *testing.T) {
	var r Mutex[Replica]
	var m RWMutex[ReplicaManager]
	r.Lock()
	defer r.Unlock()
	msg := mustPanic(t, func() { m.RLock() })
	if !strings.Contains(msg, "takes replica manager (rank 20) while holding replica (rank 30)") {
		t.Fatalf("panic %q", msg)
	}
}

func TestTwoLocksOfOneRankPanic(t *testing.T) {
	var w Mutex[LogWriter]
	var f Mutex[LogFlush]
	w.Lock()
	msg := mustPanic(t, func() { f.Lock() })
	w.Unlock()
	if !strings.Contains(msg, "takes log flush (rank 40) while holding log writer (rank 40)") {
		t.Fatalf("panic %q", msg)
	}
	var a, b Mutex[Replica]
	a.Lock()
	defer a.Unlock()
	if msg := mustPanic(t, func() { b.Lock() }); !strings.Contains(msg, "takes replica (rank 30) while holding replica (rank 30)") {
		t.Fatalf("panic %q", msg)
	}
}

func TestHoldsArePerGoroutine(t *testing.T) {
	var r Mutex[Replica]
	var m Mutex[ReplicaManager]
	r.Lock()
	defer r.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // another goroutine holds nothing, so any order starts fresh
		defer wg.Done()
		m.Lock()
		m.Unlock()
	}()
	wg.Wait()
}

func TestUnlockByAnotherGoroutineForgetsTheHold(t *testing.T) {
	var r Mutex[Replica]
	r.Lock()
	done := make(chan struct{})
	go func() { r.Unlock(); close(done) }()
	<-done
	var m Mutex[ReplicaManager]
	m.Lock() // would panic if the hold on r were still recorded here
	m.Unlock()
}

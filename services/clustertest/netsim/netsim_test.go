package netsim

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return l.Addr().String()
}

// dialEcho makes a network with an echo server on node "b" and dials it
// from node "a".
func dialEcho(t *testing.T) (*Network, net.Conn) {
	t.Helper()
	n := New()
	addr := echoServer(t)
	n.Name(addr, "b")
	c, err := n.Dialer("a")(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

func roundTrip(c net.Conn) error {
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := io.ReadFull(c, buf)
	return err
}

func TestCutClosesAndRefusesThenHeals(t *testing.T) {
	n := New()
	addr := echoServer(t)
	n.Name(addr, "b")
	dial := n.Dialer("a")
	c, err := dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c); err != nil {
		t.Fatalf("healthy link: %v", err)
	}
	n.Cut("a", "b")
	if err := roundTrip(c); err == nil {
		t.Fatal("round trip over a cut link succeeded")
	}
	if _, err := dial(context.Background(), addr); !errors.Is(err, ErrLinkCut) {
		t.Fatalf("dial over a cut link: %v", err)
	}
	// The other direction is untouched.
	if c2, err := n.Dialer("c")(context.Background(), addr); err != nil {
		t.Fatalf("unrelated link refused: %v", err)
	} else {
		c2.Close()
	}
	n.Heal("a", "b")
	c3, err := dial(context.Background(), addr)
	if err != nil {
		t.Fatalf("after heal: %v", err)
	}
	defer c3.Close()
	if err := roundTrip(c3); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

func TestDelayAddsLatency(t *testing.T) {
	n, c := dialEcho(t)
	defer c.Close()
	n.Delay("a", "b", 50*time.Millisecond)
	start := time.Now()
	if err := roundTrip(c); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("round trip took %v, want >= 50ms", el)
	}
}

func TestPauseStallsUntilResume(t *testing.T) {
	n, c := dialEcho(t)
	defer c.Close()
	n.Pause("b")
	done := make(chan error, 1)
	go func() { done <- roundTrip(c) }()
	select {
	case err := <-done:
		t.Fatalf("round trip to a paused node finished: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	n.Resume("b")
	if err := <-done; err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

func TestLossyLinkBreaksSomeConnections(t *testing.T) {
	n := New()
	addr := echoServer(t)
	n.Name(addr, "b")
	n.Drop("a", "b", 0.5)
	broken := 0
	for i := 0; i < 40; i++ {
		c, err := n.Dialer("a")(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := roundTrip(c); err != nil {
			if !errors.Is(err, ErrDropped) {
				t.Fatalf("unexpected error %v", err)
			}
			broken++
		}
		c.Close()
	}
	if broken == 0 || broken == 40 {
		t.Fatalf("%d of 40 round trips broken on a 50%% lossy link", broken)
	}
	n.Drop("a", "b", 0)
	c, _ := n.Dialer("a")(context.Background(), addr)
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("healed link: %v", err)
	}
}

// Closing a connection whose peer is paused does not wait for the peer, as
// closing a socket never does: a write held by the pause fails at once.
func TestCloseDoesNotWaitForAPausedPeer(t *testing.T) {
	n, c := dialEcho(t)
	n.Pause("b")
	defer n.Resume("b")
	done := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("held"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("write to a paused node finished: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("held write ended with %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("closing did not release the write held by the pause")
	}
}

// Closing a connection whose write a pause holds returns nil every time:
// the released write also closes the socket, and when it came first Close
// got "use of closed network connection" (seen once in CI; the race is
// narrow, TestCloseAfterCutSucceedsOnce meets the same double close every
// time).
func TestCloseWithAHeldWriteAlwaysSucceeds(t *testing.T) {
	for i := range 100 {
		n, c := dialEcho(t)
		n.Pause("b")
		done := make(chan error, 1)
		go func() {
			_, err := c.Write([]byte("held"))
			done <- err
		}()
		if i%2 == 0 {
			time.Sleep(time.Millisecond) // let the write reach the pause, or not
		}
		if err := c.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("held write %d ended with %v, want net.ErrClosed", i, err)
		}
		if err := c.Close(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("second close %d: %v, want net.ErrClosed", i, err)
		}
		n.Resume("b")
	}
}

// A connection the network cut still closes cleanly once, as a socket
// whose peer went away does.
func TestCloseAfterCutSucceedsOnce(t *testing.T) {
	n, c := dialEcho(t)
	n.Cut("a", "b")
	if err := c.Close(); err != nil {
		t.Fatalf("close after a cut: %v", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second close: %v, want net.ErrClosed", err)
	}
}

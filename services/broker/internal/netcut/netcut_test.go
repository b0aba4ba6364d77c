package netcut_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/netcut"
)

// switchable is a cut the test turns on and off.
type switchable struct {
	mu      sync.Mutex
	cut     bool
	changed chan struct{}
}

func newSwitchable() *switchable { return &switchable{changed: make(chan struct{})} }

func (s *switchable) set(cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut = cut
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *switchable) state() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut, s.changed
}

// pair dials a listener through the cut and returns both ends.
func pair(t *testing.T, s *switchable) (client net.Conn, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err = netcut.Dialer(nil, nil, s.state)(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// While cut, a connection neither sends nor delivers: a write waits (here
// until its deadline) and what arrived is held (a read ends at its
// deadline without it); once healed, the held bytes are delivered and
// writes go through.
func TestCutConnectionHoldsBytesBothWaysUntilHealed(t *testing.T) {
	s := newSwitchable()
	client, server := pair(t, s)

	s.set(true)
	if _, err := server.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	_ = client.SetDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 16)
	if n, err := client.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a cut link: %d bytes %q, err %v; want the deadline, nothing delivered", n, buf[:n], err)
	}
	if n, err := client.Write([]byte("request")); !errors.Is(err, os.ErrDeadlineExceeded) || n != 0 {
		t.Fatalf("write on a cut link: %d bytes, err %v; want the deadline, nothing sent", n, err)
	}

	s.set(false)
	_ = client.SetDeadline(time.Time{})
	n, err := client.Read(buf)
	if err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("read after healing: %q, %v; want the held answer", buf[:n], err)
	}
	if _, err := client.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("request"))
	if _, err := io.ReadFull(server, got); err != nil || string(got) != "request" {
		t.Fatalf("server read %q, %v after healing", got, err)
	}
}

// A read waiting on a cut link ends when the connection is closed.
func TestCloseEndsAWaitOnACutLink(t *testing.T) {
	s := newSwitchable()
	client, server := pair(t, s)
	s.set(true)
	if _, err := server.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := client.Read(make([]byte, 1))
		done <- err
	}()
	client.Close()
	if err := <-done; err == nil {
		t.Fatal("read on a closed, cut connection succeeded")
	}
}

// A dial while cut does not complete: it fails when its context ends, and
// succeeds once healed.
func TestDialWaitsOutTheCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := newSwitchable()
	s.set(true)
	dial := netcut.Dialer(nil, nil, s.state)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if c, err := dial(ctx, ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("dialled through a cut link")
	}
	s.set(false)
	c, err := dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatalf("dial after healing: %v", err)
	}
	c.Close()
}

// Connections to the addresses the cut does not apply to carry bytes as
// usual, cut or not.
func TestUncutLinkFlows(t *testing.T) {
	cut := func() (bool, <-chan struct{}) { return true, make(chan struct{}) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()
	elsewhere := func(string) bool { return false }
	c, err := netcut.Dialer(nil, elsewhere, cut)(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("echo")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "echo" {
		t.Fatalf("echo %q, %v", got, err)
	}
}

package links

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return lis.Addr().String()
}

func proxy(t *testing.T, target string, identify func(net.Conn) string) *Proxy {
	t.Helper()
	p, err := Listen("test", "127.0.0.1:0", target, identify)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back within d.
func roundTrip(c net.Conn, msg string, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echo differs: " + string(buf))
	}
	return nil
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestBlackholeHoldsThenHealCloses: a black-holed link accepts new
// connections and passes no byte on old or new ones, without closing or
// refusing anything (a partition, not a dead process); healing closes the
// held connections and new ones work again.
func TestBlackholeHoldsThenHealCloses(t *testing.T) {
	p := proxy(t, echoServer(t), nil)
	old := dial(t, p.Addr())
	if err := roundTrip(old, "before", 2*time.Second); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	if err := p.Block(Any, Blackhole); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(old, "during", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("open connection during a blackhole: %v, want a timeout (held, not closed)", err)
	}
	fresh, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatalf("new connection during a blackhole: %v, want accepted (a refusal tells the controller the node is dead)", err)
	}
	defer fresh.Close()
	if err := roundTrip(fresh, "held", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("new connection during a blackhole: %v, want a timeout", err)
	}
	if open, held := p.Stats(); held != 2 || open != 2 {
		t.Fatalf("%d open, %d held connections during the cut; want 2 and 2", open, held)
	}
	p.Unblock(Any)
	for name, c := range map[string]net.Conn{"open": old, "new": fresh} {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 64)); err == nil || timedOut(err) {
			t.Fatalf("%s connection after the heal: %v, want it closed so the peer reconnects", name, err)
		}
	}
	if err := roundTrip(dial(t, p.Addr()), "after", 2*time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}

// TestRefuseRefusesAndHealListens: Refuse looks like a dead process
// (connection refused), and the heal listens again on the same address.
func TestRefuseRefusesAndHealListens(t *testing.T) {
	p := proxy(t, echoServer(t), nil)
	old := dial(t, p.Addr())
	if err := p.Block(Any, Refuse); err != nil {
		t.Fatal(err)
	}
	_ = old.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := old.Read(make([]byte, 8)); err == nil || timedOut(err) {
		t.Fatalf("open connection after Refuse: %v, want it closed", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial during Refuse: %v, want connection refused", err)
	}
	p.Unblock(Any)
	if err := roundTrip(dial(t, p.Addr()), "back", 2*time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	if err := p.Block(Any, Mode(9)); err == nil {
		t.Fatal("Block accepted an unknown mode")
	}
}

// TestBlockOneSource: connections identified as another source's pass
// while one source is cut; this process is identified through /proc.
func TestBlockOneSource(t *testing.T) {
	testenv.RequireFile(t, "/proc/net/tcp", "/proc/net/tcp (the links name a connection's process through it)", "run on Linux with /proc mounted")
	ident := ProcIdentifier(func() map[int]string { return map[int]string{os.Getpid(): "self"} })
	p := proxy(t, echoServer(t), ident)
	if err := p.Block("other", Blackhole); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if err := roundTrip(c, "mine", 2*time.Second); err != nil {
		t.Fatalf("another source's cut stopped this process's connection: %v", err)
	}
	if err := p.Block("self", Blackhole); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c, "cut", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("this process's open connection with its source cut: %v, want a timeout", err)
	}
	if err := roundTrip(dial(t, p.Addr()), "cut", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("this process's new connection with its source cut: %v, want a timeout (identified as self)", err)
	}
	p.Unblock("self")
	if err := roundTrip(dial(t, p.Addr()), "healed", 2*time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}

// TestBufferingIsBounded: a sender whose bytes go nowhere (a held link, or
// a target that stops reading) is blocked by TCP flow control after a
// bounded amount: the proxy holds at most one buffer per direction.
func TestBufferingIsBounded(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close() // never reads
		}
	}()
	p := proxy(t, lis.Addr().String(), nil)
	const total = 256 << 20
	for _, cut := range []bool{false, true} {
		c := dial(t, p.Addr())
		if cut {
			if err := p.Block(Any, Blackhole); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetWriteDeadline(time.Now().Add(1500 * time.Millisecond))
		chunk := make([]byte, 1<<20)
		written := 0
		for written < total {
			n, err := c.Write(chunk)
			written += n
			if err != nil {
				break
			}
		}
		// Kernel socket buffers on both hops plus one proxy buffer: a few
		// MiB at most, never the whole stream.
		if written >= total/4 {
			t.Fatalf("cut=%v: the sender wrote %d MiB into a link nobody reads: buffering is unbounded", cut, written>>20)
		}
		t.Logf("cut=%v: sender blocked after %d KiB", cut, written>>10)
		p.Unblock(Any)
	}
}

// TestDeadTargetIsRefused: while the target refuses connections (its
// process is gone) the proxy refuses too, so the controller still sees a
// dead node as dead; it listens again once the target does.
func TestDeadTargetIsRefused(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := lis.Addr().String()
	lis.Close()
	p := proxy(t, target, nil)
	// The first connection finds the target gone and is reset.
	if c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second); err == nil {
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || timedOut(err) {
			t.Fatalf("connection to a dead target: %v, want it closed", err)
		}
		c.Close()
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy of a dead target: dial %v, want connection refused", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	lis2, err := net.Listen("tcp", target)
	if err != nil {
		testenv.Skipf(t, "the restart half: the target's port was taken meanwhile: %v", err)
	}
	defer lis2.Close()
	go func() {
		for {
			c, err := lis2.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	deadline = time.Now().Add(3 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err == nil {
			err = roundTrip(c, "alive", 2*time.Second)
			c.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the target listens again but the proxy does not forward: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTargetDeathIsRefusedAtOnce: when the target's process dies, its
// peers' next dial through the proxy is refused, as without the proxy: the
// proxy stops listening before it closes their connections (the
// controller's fast failover revokes a broker only on a refused dial made
// right after its session broke).
func TestTargetDeathIsRefusedAtOnce(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	p := proxy(t, lis.Addr().String(), nil)
	c := dial(t, p.Addr())
	srv := <-accepted
	// The process dies: its listener and its connections go.
	lis.Close()
	srv.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || timedOut(err) {
		t.Fatalf("connection to a dead target: %v, want it closed", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("first dial after the target died: %v, want connection refused", err)
	}
}

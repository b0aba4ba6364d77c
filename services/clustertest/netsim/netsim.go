// Package netsim simulates the network between in-process tidemark nodes: each
// node dials its peers through a Network, which can make lossy, delay, cut or
// pause any directed link while real gRPC runs over real loopback sockets.
//
// A link is directed: from the dialing node to the dialed address. Cutting a
// link closes its open connections and makes new dials fail; delaying a link
// adds latency to every write on it; pausing a node stalls every connection
// to and from it without closing them (like a process stopped with SIGSTOP).
package netsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Network holds the link rules and the connections made through it.
type Network struct {
	mu     sync.Mutex
	names  map[string]string // address -> node name
	cut    map[link]bool
	delay  map[link]time.Duration
	drop   map[link]float64
	paused map[string]bool // node name -> paused
	rng    *rand.Rand
	conns  map[*conn]struct{}
	resume *sync.Cond
}

type link struct{ from, to string }

// New returns a network with every link healthy.
func New() *Network {
	n := &Network{
		names:  map[string]string{},
		cut:    map[link]bool{},
		delay:  map[link]time.Duration{},
		drop:   map[link]float64{},
		paused: map[string]bool{},
		rng:    rand.New(rand.NewPCG(1, 2)),
		conns:  map[*conn]struct{}{},
	}
	n.resume = sync.NewCond(&n.mu)
	return n
}

// Name tells the network which node listens on addr, so rules can be given
// by node name.
func (n *Network) Name(addr, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.names[addr] = node
}

// ErrLinkCut is returned by dials over a cut link.
var ErrLinkCut = errors.New("netsim: link is cut")

// Dialer returns a dial function for node `from`, for grpc.WithContextDialer.
func (n *Network) Dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		n.mu.Lock()
		to := n.nameOf(addr)
		l := link{from, to}
		if n.cut[l] {
			n.mu.Unlock()
			return nil, fmt.Errorf("%w: %s -> %s", ErrLinkCut, from, to)
		}
		n.mu.Unlock()
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: raw, net: n, l: l}
		n.mu.Lock()
		n.conns[c] = struct{}{}
		n.mu.Unlock()
		return c, nil
	}
}

func (n *Network) nameOf(addr string) string {
	if name, ok := n.names[addr]; ok {
		return name
	}
	return addr
}

// Cut breaks the link from -> to (one direction): open connections close and
// new dials fail until Heal.
func (n *Network) Cut(from, to string) {
	n.mu.Lock()
	n.cut[link{from, to}] = true
	var doomed []*conn
	for c := range n.conns {
		if c.l == (link{from, to}) {
			doomed = append(doomed, c)
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		_ = c.shut()
	}
}

// Partition cuts both directions between a and b.
func (n *Network) Partition(a, b string) {
	n.Cut(a, b)
	n.Cut(b, a)
}

// Isolate cuts every link to and from node, given the other nodes.
func (n *Network) Isolate(node string, others ...string) {
	for _, o := range others {
		if o != node {
			n.Partition(node, o)
		}
	}
}

// Delay adds d to every write on the link from -> to (0 removes it).
func (n *Network) Delay(from, to string, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d <= 0 {
		delete(n.delay, link{from, to})
		return
	}
	n.delay[link{from, to}] = d
}

// ErrDropped is the error of a write lost by a lossy link.
var ErrDropped = errors.New("netsim: connection dropped by a lossy link")

// Drop makes the link from -> to lossy: each write fails with probability p
// and breaks its connection, as a reset after packet loss would (TCP does
// not lose bytes silently, it stalls or resets). p <= 0 heals it.
func (n *Network) Drop(from, to string, p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p <= 0 {
		delete(n.drop, link{from, to})
		return
	}
	n.drop[link{from, to}] = p
}

// Pause stalls every connection from or to node until Resume, without
// closing them.
func (n *Network) Pause(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paused[node] = true
}

// Resume lets a paused node's connections flow again.
func (n *Network) Resume(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.paused, node)
	n.resume.Broadcast()
}

// HealAll removes every rule.
func (n *Network) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = map[link]bool{}
	n.delay = map[link]time.Duration{}
	n.drop = map[link]float64{}
	n.paused = map[string]bool{}
	n.resume.Broadcast()
}

// Heal restores both directions between a and b.
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, link{a, b})
	delete(n.cut, link{b, a})
}

// gate blocks while either end of c's link is paused and reports the
// link's delay, or an error when the link has been cut or c closed
// meanwhile (closing a socket never waits for a stopped peer).
func (n *Network) gate(c *conn) (time.Duration, error) {
	l := c.l
	n.mu.Lock()
	defer n.mu.Unlock()
	for (n.paused[l.from] || n.paused[l.to]) && !c.closed {
		n.resume.Wait()
	}
	if c.closed {
		return 0, net.ErrClosed
	}
	if n.cut[l] {
		return 0, ErrLinkCut
	}
	if p := n.drop[l]; p > 0 && n.rng.Float64() < p {
		return 0, ErrDropped
	}
	return n.delay[l], nil
}

type conn struct {
	net.Conn
	net      *Network
	l        link
	once     sync.Once
	shutErr  error       // the socket's close, set inside once
	closed   bool        // guarded by net.mu
	userDone atomic.Bool // Close was called
}

func (c *conn) Write(p []byte) (int, error) {
	d, err := c.net.gate(c)
	if err != nil {
		_ = c.shut()
		return 0, err
	}
	if d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Write(p)
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	// Hold data that arrived while paused until the pause ends, so a paused
	// node neither sends nor receives.
	if _, gerr := c.net.gate(c); gerr != nil && err == nil {
		return 0, gerr
	}
	return n, err
}

// Close closes the connection as a socket's Close does: the first call
// succeeds even when the simulated network already broke the connection
// (a cut, or a write it refused), as a real socket's does after its peer
// went away; later calls fail with net.ErrClosed.
func (c *conn) Close() error {
	if c.userDone.Swap(true) {
		return net.ErrClosed
	}
	return c.shut()
}

// shut closes the socket once, whoever comes first: the user, a cut, or a
// write released by that close. Each caller waits for it and gets its
// result; a second close of the socket would fail with "use of closed
// network connection" for whichever caller came second.
func (c *conn) shut() error {
	c.once.Do(func() {
		c.net.mu.Lock()
		delete(c.net.conns, c)
		c.closed = true
		c.net.resume.Broadcast() // wake its reads and writes held by a pause
		c.net.mu.Unlock()
		c.shutErr = c.Conn.Close()
	})
	return c.shutErr
}

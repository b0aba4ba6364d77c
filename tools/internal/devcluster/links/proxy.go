// Package links puts a small TCP proxy in front of each node of a dev
// cluster on loopback, so a test can cut the network between separate
// processes without root: every connection to a node crosses its proxy,
// and the proxy can hold (black-hole) or refuse connections, from every
// source or from one named source (the process on the other end, found
// through /proc on Linux).
//
// A black-holed connection looks like a partition: the proxy accepts new
// connections and answers nothing, and stops forwarding on the open ones,
// so the peer sees timeouts, never a refused connection or a reset (the
// controller revokes a broker early only when its address refuses
// connections). Refuse looks like a dead process: the listener closes (or,
// for one source, the connection is reset). Healing closes every
// connection that was held, so the peers reconnect on fresh ones instead
// of resuming streams whose bytes the proxy dropped.
//
// Buffering is bounded: each direction of a connection holds at most one
// buffer (bufSize bytes); a held connection is not read at all, so the
// kernel's socket buffers fill and the sender blocks, as over a real
// partition.
package links

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// Mode is how a cut link behaves.
type Mode int

const (
	// Blackhole accepts and holds: no data passes, nothing is refused.
	Blackhole Mode = iota + 1
	// Refuse closes: the listener stops listening (every source), or the
	// connection is reset at once (one source).
	Refuse
)

func (m Mode) String() string {
	switch m {
	case Blackhole:
		return "blackhole"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Any stands for every source.
const Any = "*"

// bufSize is each direction's copy buffer: the most a connection's
// direction holds inside the proxy.
const bufSize = 32 << 10

// Proxy forwards connections from Addr to a target address.
type Proxy struct {
	name, addr, target string
	// identify names the process on the other end of an accepted connection
	// ("" when unknown); nil names none.
	identify func(net.Conn) string

	mu      sync.Mutex
	lis     net.Listener
	blocked map[string]Mode
	pipes   map[*pipe]struct{}
	// targetDown: the target refused a connection; the listener is closed
	// until it listens again, so a dead process still looks refused.
	targetDown bool
	closed     bool
	wg         sync.WaitGroup
}

// pipe is one proxied connection.
type pipe struct {
	src    string
	client net.Conn
	server net.Conn // nil while held since the accept
	held   bool
	done   chan struct{}
	once   sync.Once
}

func (p *pipe) close() {
	p.once.Do(func() {
		close(p.done)
		p.client.Close()
		if p.server != nil {
			p.server.Close()
		}
	})
}

// Listen starts a proxy on addr (host:port; port 0 picks one) to target.
func Listen(name, addr, target string, identify func(net.Conn) string) (*Proxy, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("link %s: listen %s: %w", name, addr, err)
	}
	p := &Proxy{name: name, addr: lis.Addr().String(), target: target, identify: identify, lis: lis,
		blocked: map[string]Mode{}, pipes: map[*pipe]struct{}{}}
	p.wg.Add(1)
	go p.accept(lis)
	return p, nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.addr }

// Target is where it forwards to.
func (p *Proxy) Target() string { return p.target }

// Name names the link (e.g. "broker-1", "broker-1→etcd").
func (p *Proxy) Name() string { return p.name }

// blockedLocked reports how connections from src are cut (0: not).
func (p *Proxy) blockedLocked(src string) Mode {
	if m, ok := p.blocked[Any]; ok {
		return m
	}
	if src != "" {
		return p.blocked[src]
	}
	return 0
}

func (p *Proxy) accept(lis net.Listener) {
	defer p.wg.Done()
	for {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		src := ""
		if p.identify != nil {
			src = p.identify(c)
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		pp := &pipe{src: src, client: c, done: make(chan struct{})}
		switch p.blockedLocked(src) {
		case Refuse:
			p.mu.Unlock()
			reset(c)
			continue
		case Blackhole:
			// Held without reading: nothing is buffered here, the
			// sender's kernel buffers fill up.
			pp.held = true
			p.pipes[pp] = struct{}{}
			p.mu.Unlock()
			continue
		}
		p.pipes[pp] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.connect(pp)
	}
}

// connect dials the target for an accepted connection and pumps both ways.
func (p *Proxy) connect(pp *pipe) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	p.mu.Lock()
	if err == nil && !pp.held && !p.closed {
		select {
		case <-pp.done:
		default:
			pp.server = s
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pump(pp, pp.server, pp.client)
			go p.pump(pp, pp.client, pp.server)
			return
		}
	}
	held := pp.held
	if !held {
		delete(p.pipes, pp)
	}
	p.mu.Unlock()
	if s != nil {
		s.Close()
	}
	if held {
		return // cut while dialing: stays held until the heal closes it
	}
	// The listener closes before the client sees its connection end.
	if errors.Is(err, syscall.ECONNREFUSED) {
		p.targetRefused()
	}
	reset(pp.client)
	pp.close()
}

// pump copies src to dst one buffer at a time; a buffer read while the
// link is cut is held until the heal closes the connection.
func (p *Proxy) pump(pp *pipe, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			held := pp.held
			p.mu.Unlock()
			if held {
				<-pp.done
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			p.mu.Lock()
			held := pp.held
			if !held {
				delete(p.pipes, pp)
			}
			p.mu.Unlock()
			if held {
				<-pp.done // a cut link shows no close either
				return
			}
			// The target hung up: if its process is gone, stop listening
			// before the client learns of it, so the client's next dial
			// is refused as it would be without the proxy.
			if src == pp.server {
				select {
				case <-pp.done:
				default:
					p.probeTarget()
				}
			}
			pp.close()
			return
		}
	}
}

// probeTarget dials the target and closes the listener if it refuses;
// twice, since a dying process's connections may close just before its
// listener does.
func (p *Proxy) probeTarget() {
	for i := range 2 {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		c, err := net.DialTimeout("tcp", p.target, time.Second)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			p.targetRefused()
		}
		return
	}
}

// targetRefused closes the listener while the target refuses connections
// (its process is gone), and listens again once it accepts: the proxy
// must not turn a dead node into one that accepts and hangs up.
func (p *Proxy) targetRefused() {
	p.mu.Lock()
	if p.targetDown || p.closed || p.lis == nil {
		p.mu.Unlock()
		return
	}
	p.targetDown = true
	p.lis.Close()
	p.lis = nil
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			time.Sleep(50 * time.Millisecond)
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			c, err := net.DialTimeout("tcp", p.target, time.Second)
			if err != nil {
				continue
			}
			c.Close()
			p.mu.Lock()
			p.targetDown = false
			p.relistenLocked()
			p.mu.Unlock()
			return
		}
	}()
}

// relistenLocked opens the listener again unless something keeps it shut.
func (p *Proxy) relistenLocked() {
	if p.lis != nil || p.closed || p.targetDown || p.blocked[Any] == Refuse {
		return
	}
	for range 50 {
		lis, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.lis = lis
			p.wg.Add(1)
			go p.accept(lis)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Block cuts connections from src (Any: every source) in mode m: open
// ones are held (Blackhole) or closed (Refuse), new ones likewise.
func (p *Proxy) Block(src string, m Mode) error {
	if m != Blackhole && m != Refuse {
		return fmt.Errorf("link %s: mode must be Blackhole or Refuse, got %v", p.name, m)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[src] = m
	for pp := range p.pipes {
		if src != Any && pp.src != src {
			continue
		}
		if m == Refuse {
			delete(p.pipes, pp)
			reset(pp.client)
			pp.close()
			continue
		}
		pp.held = true
	}
	if m == Refuse && src == Any && p.lis != nil {
		p.lis.Close()
		p.lis = nil
	}
	return nil
}

// Unblock heals the cut of src (Any: the cut of every source, not the
// per-source ones) and closes the connections it held, so their peers
// reconnect.
func (p *Proxy) Unblock(src string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.blocked, src)
	for pp := range p.pipes {
		if pp.held && p.blockedLocked(pp.src) == 0 {
			delete(p.pipes, pp)
			pp.close()
		}
	}
	p.relistenLocked()
}

// Blocked lists the cut sources and their modes.
func (p *Proxy) Blocked() map[string]Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]Mode{}
	for k, v := range p.blocked {
		out[k] = v
	}
	return out
}

// Stats counts the open and held connections.
func (p *Proxy) Stats() (open, held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pp := range p.pipes {
		open++
		if pp.held {
			held++
		}
	}
	return open, held
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	if p.lis != nil {
		p.lis.Close()
		p.lis = nil
	}
	for pp := range p.pipes {
		delete(p.pipes, pp)
		pp.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// reset closes c with an RST rather than a FIN, as a refusing host would.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

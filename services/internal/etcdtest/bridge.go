package etcdtest

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bridge is a TCP proxy between clients and the server. Pause blackholes the
// traffic (connections stay open, bytes stop flowing) the way a stalled
// process or a network partition does, so lease keepalives stop reaching
// etcd; PauseWay does so in one direction only; Blackhole does so for good
// to the connections open now only; DropConnections cuts every connection so
// clients must redial.
type Bridge struct {
	ln     net.Listener
	scheme string // the server's: http or https
	target string

	mu     sync.Mutex
	links  map[*link]struct{}
	paused [2]chan struct{} // by way; non-nil while paused, closed on resuming
	down   bool             // the server is stopped: connections are refused
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// link is one proxied client connection.
type link struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
	held           bool // blackholed; guarded by the bridge's mu
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// NewBridge starts a bridge in front of the server, closed when the test ends.
func (s *Server) NewBridge(tb testing.TB) *Bridge {
	tb.Helper()
	u, err := url.Parse(s.Endpoint())
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("etcdtest: bridge listen: %v", err)
	}
	b := &Bridge{ln: ln, scheme: u.Scheme, target: u.Host, links: map[*link]struct{}{}, closed: make(chan struct{})}
	b.wg.Add(1)
	go b.accept()
	tb.Cleanup(b.Close)
	s.mu.Lock()
	s.bridges = append(s.bridges, b)
	s.mu.Unlock()
	return b
}

// setDown makes the bridge refuse (accept and close at once) connections
// while the server is stopped, and cuts those it has: what clients of an
// exited process see.
func (b *Bridge) setDown(down bool) {
	b.mu.Lock()
	b.down = down
	b.mu.Unlock()
	if down {
		b.DropConnections()
	}
}

// Endpoint is the client URL that goes through the bridge.
func (b *Bridge) Endpoint() string { return b.scheme + "://" + b.ln.Addr().String() }

// Client returns a client connected through the bridge, closed when the test ends.
func (b *Bridge) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return NewClient(tb, b.Endpoint())
}

// Way is a direction of the traffic through the bridge, or both (ORed).
type Way int

const (
	// ToServer is what clients send: requests, keepalives.
	ToServer Way = 1 << iota
	// ToClient is what the server sends: answers, watch events.
	ToClient
)

// Pause stops forwarding bytes in both directions until Resume.
func (b *Bridge) Pause() { b.PauseWay(ToServer | ToClient) }

// Resume lets held and new traffic flow again.
func (b *Bridge) Resume() { b.ResumeWay(ToServer | ToClient) }

// PauseWay holds the bytes going the given way until ResumeWay (or
// Resume): a one-way stall, such as requests that reach etcd while their
// answers do not.
func (b *Bridge) PauseWay(w Way) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.paused {
		if w&(1<<i) != 0 && b.paused[i] == nil {
			b.paused[i] = make(chan struct{})
		}
	}
}

// ResumeWay lets the bytes going the given way flow again.
func (b *Bridge) ResumeWay(w Way) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.paused {
		if w&(1<<i) != 0 && b.paused[i] != nil {
			close(b.paused[i])
			b.paused[i] = nil
		}
	}
}

// Blackhole stops forwarding bytes, both ways and for good, on every
// connection open now, without closing it: what a dropped NAT or firewall
// entry or a dead route does to a TCP connection, which neither end hears
// about. Connections made afterwards flow.
func (b *Bridge) Blackhole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range b.links {
		l.held = true
	}
}

// DropConnections closes every proxied connection; new ones are accepted.
func (b *Bridge) DropConnections() {
	b.mu.Lock()
	links := make([]*link, 0, len(b.links))
	for l := range b.links {
		links = append(links, l)
	}
	b.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Close stops the bridge and cuts every connection. Safe to call twice.
func (b *Bridge) Close() {
	b.once.Do(func() {
		close(b.closed)
		_ = b.ln.Close()
		b.DropConnections()
		b.wg.Wait()
	})
}

func (b *Bridge) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		b.mu.Lock()
		down := b.down
		b.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s, done: make(chan struct{})}
		b.mu.Lock()
		select {
		case <-b.closed:
			b.mu.Unlock()
			l.close()
			return
		default:
		}
		b.links[l] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(2)
		go b.pipe(l, l.server, l.client, ToServer)
		go b.pipe(l, l.client, l.server, ToClient)
	}
}

// pipe copies src to dst, holding each chunk while way is paused.
func (b *Bridge) pipe(l *link, dst, src net.Conn, way Way) {
	defer b.wg.Done()
	defer func() {
		l.close()
		b.mu.Lock()
		delete(b.links, l)
		b.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !b.waitResumed(l, way) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitResumed blocks while way is paused, and for good once the link is
// blackholed; false means the link or bridge is gone.
func (b *Bridge) waitResumed(l *link, way Way) bool {
	for {
		b.mu.Lock()
		p := b.paused[0]
		if way == ToClient {
			p = b.paused[1]
		}
		held := l.held
		b.mu.Unlock()
		if held {
			select {
			case <-l.done:
			case <-b.closed:
			}
			return false
		}
		if p == nil {
			return true
		}
		select {
		case <-p:
		case <-l.done:
			return false
		case <-b.closed:
			return false
		}
	}
}

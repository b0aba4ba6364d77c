// Package connlimit caps the connections one client address may hold open
// on a listener (Kafka's max.connections.per.ip): the connection over the
// limit is accepted and closed at once, before any bytes of it are read, and
// reported, so one misbehaving host cannot use up the server's descriptors.
package connlimit

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RefusedWarnEvery is how often the servers warn of the connections
// refused to one address: a client reconnecting in a loop would write a
// line each time (they count every one).
const RefusedWarnEvery = 10 * time.Second

// Options configures a Listener.
type Options struct {
	// PerIP is the most connections one address may hold; <= 0 is no limit.
	PerIP int
	// Overrides sets other limits for some addresses (IPs as written by
	// net.IP.String, e.g. "10.0.0.7" or "::1"); 0 refuses that address.
	Overrides map[string]int
	// Refused, when set, is called for each refused connection, with its
	// address and the limit that applied (for logs and metrics).
	Refused func(ip string, limit int)
	// Counts, when set, are shared with the other listeners given the same:
	// an address's connections on all of them count against one limit, as
	// Kafka counts a broker's connections across its listeners. Nil: this
	// listener's own.
	Counts *Counts
}

// Counts are the connections each address holds open.
type Counts struct {
	mu   sync.Mutex
	open map[string]int
}

// NewCounts returns empty counts to share between listeners.
func NewCounts() *Counts { return &Counts{open: map[string]int{}} }

// Listener is a net.Listener that enforces Options.
type Listener struct {
	net.Listener
	o Options
	c *Counts
}

// Wrap limits lis. Without any limit it returns lis itself.
func Wrap(lis net.Listener, o Options) net.Listener {
	if o.PerIP <= 0 && len(o.Overrides) == 0 {
		return lis
	}
	c := o.Counts
	if c == nil {
		c = NewCounts()
	}
	return &Listener{Listener: lis, o: o, c: c}
}

// Accept returns the next connection within its address's limit; those
// over it are closed here and never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := hostOf(c.RemoteAddr())
		if limit, ok := l.admit(ip); !ok {
			if l.o.Refused != nil {
				l.o.Refused(ip, limit)
			}
			_ = c.Close()
			continue
		}
		return &conn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *Listener) limitFor(ip string) int {
	if n, ok := l.o.Overrides[ip]; ok {
		return n
	}
	if l.o.PerIP <= 0 {
		return -1
	}
	return l.o.PerIP
}

func (l *Listener) admit(ip string) (int, bool) {
	limit := l.limitFor(ip)
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if limit >= 0 && l.c.open[ip] >= limit {
		return limit, false
	}
	l.c.open[ip]++
	return limit, true
}

func (l *Listener) release(ip string) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.c.open[ip]--; l.c.open[ip] <= 0 {
		delete(l.c.open, ip)
	}
}

// Open is the number of connections ip holds (tests, dashboards), on every
// listener sharing its Counts.
func (l *Listener) Open(ip string) int {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.c.open[ip]
}

func hostOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

// conn gives its slot back on the first Close.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// ParseOverrides parses Kafka's max.connections.per.ip.overrides form,
// "ip:limit" pairs separated by commas ("127.0.0.1:200,::1:50": the limit
// follows the last colon).
func ParseOverrides(s string) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		i := strings.LastIndexByte(pair, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q is not ip:limit", pair)
		}
		host, n := strings.Trim(pair[:i], "[]"), pair[i+1:]
		ip := net.ParseIP(host)
		if ip == nil {
			return nil, fmt.Errorf("%q in %q is not an IP address", host, pair)
		}
		limit, err := strconv.Atoi(n)
		if err != nil || limit < 0 {
			return nil, fmt.Errorf("limit %q of %s is not a whole number >= 0", n, host)
		}
		out[ip.String()] = limit
	}
	return out, nil
}

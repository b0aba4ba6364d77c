// Package netcut cuts a broker's network links for fault injection: a
// dialer whose connections stop carrying bytes, both ways, while their link
// is cut, as a network that drops every packet would. The other end and the
// client code above see what they would see then: a dial that does not
// complete, writes that are not answered, reads that wait. Once the link
// heals the held bytes flow again, as TCP delivers them once the network is
// back, unless the connection was given up meanwhile.
package netcut

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// Dial opens a connection to addr.
type Dial func(ctx context.Context, addr string) (net.Conn, error)

// Cut says whether the links are cut now, and returns a channel closed at
// the next change (nil is allowed when not cut).
type Cut func() (bool, <-chan struct{})

// Dialer wraps dial (nil: TCP, or a Unix socket for a unix: address) so
// that its connections to the addresses for which applies returns true
// (nil: every address) follow cut. The others are dial's own.
func Dialer(dial Dial, applies func(addr string) bool, cut Cut) Dial {
	if dial == nil {
		dial = plainDial
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if applies != nil && !applies(addr) {
			return dial(ctx, addr)
		}
		// The handshake's first packet is lost: the dial waits for the
		// link to heal or its caller to give up.
		if err := awaitHealed(cut, ctx.Done(), nil, nil); err != nil {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("link to %s cut: %w", addr, ctx.Err())}
		}
		c, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		return &conn{Conn: c, cut: cut, closed: make(chan struct{}), deadlineMoved: make(chan struct{})}, nil
	}
}

// plainDial dials as gRPC's default dialer does for a passthrough address,
// and as etcd's client does for its endpoints (unix:path, unix:///path).
func plainDial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if abs, ok := strings.CutPrefix(path, "//"); ok {
			path = abs
		}
		return d.DialContext(ctx, "unix", path)
	}
	return d.DialContext(ctx, "tcp", addr)
}

// errClosed is what a wait on a connection closed meanwhile returns.
var errClosed = net.ErrClosed

// awaitHealed returns once the link is not cut, or with an error when done
// is closed (ctx), the connection closes (closed), or the deadline that
// deadline (nil: none) returns passes; the channel deadline returns with
// it wakes the wait to read the deadline again.
func awaitHealed(cut Cut, done, closed <-chan struct{}, deadline func() (time.Time, <-chan struct{})) error {
	for {
		isCut, changed := cut()
		if !isCut {
			return nil
		}
		var moved <-chan struct{}
		var at time.Time
		if deadline != nil {
			at, moved = deadline()
		}
		if err := wait(changed, moved, done, closed, at); err != nil {
			return err
		}
	}
}

// wait returns nil when changed or moved closes, else the error of done,
// closed or the deadline at (zero: none), whichever comes first.
func wait(changed, moved, done, closed <-chan struct{}, at time.Time) error {
	var expired <-chan time.Time
	if !at.IsZero() {
		d := time.Until(at)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-changed:
	case <-moved:
	case <-done:
		return context.Canceled
	case <-closed:
		return errClosed
	case <-expired:
		return os.ErrDeadlineExceeded
	}
	return nil
}

// conn holds its bytes while its link is cut: what is written is sent once
// the link heals, what arrived is delivered once it heals.
type conn struct {
	net.Conn
	cut Cut

	closeOnce sync.Once
	closed    chan struct{}

	mu            sync.Mutex
	readBy        time.Time
	writeBy       time.Time
	deadlineMoved chan struct{} // closed and replaced when a deadline is set
	// held are bytes read from the network while the link was cut whose
	// Read gave up (deadline): the next Read returns them first.
	held []byte
}

func (c *conn) readDeadline() (time.Time, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readBy, c.deadlineMoved
}

func (c *conn) writeDeadline() (time.Time, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeBy, c.deadlineMoved
}

// flowing reports, cheaply, whether the link is up now.
func (c *conn) flowing() bool {
	cut, _ := c.cut()
	return !cut
}

func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	if len(held) == 0 {
		n, err := c.Conn.Read(p)
		if n == 0 || c.flowing() {
			return n, err
		}
		held = append([]byte(nil), p[:n]...)
		// An error with data is seen again by the next Read.
	}
	if err := awaitHealed(c.cut, nil, c.closed, c.readDeadline); err != nil {
		c.mu.Lock()
		c.held = held
		c.mu.Unlock()
		return 0, err
	}
	n := copy(p, held)
	c.mu.Lock()
	c.held = held[n:]
	c.mu.Unlock()
	return n, nil
}

func (c *conn) Write(p []byte) (int, error) {
	if !c.flowing() {
		if err := awaitHealed(c.cut, nil, c.closed, c.writeDeadline); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *conn) setDeadlines(read, write bool, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if read {
		c.readBy = t
	}
	if write {
		c.writeBy = t
	}
	close(c.deadlineMoved)
	c.deadlineMoved = make(chan struct{})
}

func (c *conn) SetDeadline(t time.Time) error {
	c.setDeadlines(true, true, t)
	return c.Conn.SetDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.setDeadlines(true, false, t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.setDeadlines(false, true, t)
	return c.Conn.SetWriteDeadline(t)
}

package tlsconf

import (
	"context"
	"crypto/tls"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// Credentials is gRPC's TLS transport credentials for c, with each write
// of the HTTP/2 transport leaving as one write to the socket.
//
// crypto/tls writes every record (at most 16 KiB of plaintext) to the
// socket on its own, so one flush of gRPC's write buffer (32 KiB) took
// several write syscalls, and a 64 KiB produce request or a follower's
// fetch answer of several batches a handful, each waking the reader on the
// other end. Here the records of one Write are gathered and written
// together: the same bytes, in the same order, in fewer syscalls.
func Credentials(c *tls.Config) credentials.TransportCredentials {
	return coalescingCreds{credentials.NewTLS(c)}
}

type coalescingCreds struct {
	credentials.TransportCredentials
}

func (c coalescingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	g := &gatherer{Conn: raw}
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, g)
	if err != nil {
		return nil, nil, err
	}
	return &coalescedConn{Conn: conn, g: g}, info, nil
}

func (c coalescingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	g := &gatherer{Conn: raw}
	conn, info, err := c.TransportCredentials.ServerHandshake(g)
	if err != nil {
		return nil, nil, err
	}
	return &coalescedConn{Conn: conn, g: g}, info, nil
}

func (c coalescingCreds) Clone() credentials.TransportCredentials {
	return coalescingCreds{c.TransportCredentials.Clone()}
}

// coalescedConn is the TLS connection gRPC reads and writes.
type coalescedConn struct {
	net.Conn // the TLS connection, over g
	g        *gatherer
	wmu      sync.Mutex // one Write at a time: gather and flush pair up
}

// Write encrypts p into records gathered by g, then writes them at once.
func (c *coalescedConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.g.gather()
	n, err := c.Conn.Write(p)
	if ferr := c.g.flush(); err == nil {
		err = ferr
	}
	return n, err
}

// gatherBufs holds the buffers of writes in progress: an idle connection
// keeps none.
var gatherBufs = sync.Pool{New: func() any { b := make([]byte, 0, 40<<10); return &b }}

// gatherer is the socket under the TLS connection. Between gather and
// flush it keeps what TLS writes; otherwise it writes through. Every socket
// write happens under mu, so a record TLS writes from another goroutine (a
// key update answered while reading) cannot slip between gathered ones.
type gatherer struct {
	net.Conn
	mu  sync.Mutex
	buf *[]byte // non-nil while gathering
}

func (g *gatherer) gather() {
	g.mu.Lock()
	g.buf = gatherBufs.Get().(*[]byte)
	g.mu.Unlock()
}

func (g *gatherer) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.buf != nil {
		*g.buf = append(*g.buf, p...)
		return len(p), nil
	}
	return g.Conn.Write(p)
}

func (g *gatherer) flush() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.buf
	g.buf = nil
	if b == nil {
		return nil
	}
	_, err := g.Conn.Write(*b)
	if cap(*b) <= 256<<10 { // keep the pool's buffers bounded
		*b = (*b)[:0]
		gatherBufs.Put(b)
	}
	return err
}

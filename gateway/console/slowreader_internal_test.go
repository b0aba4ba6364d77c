package console

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// smallBufListener shrinks the kernel's send buffer of accepted connections,
// so that a page that stops reading blocks the server's writes after a few
// KB instead of a few MB (the effect is the same, only sooner).
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// A page that stops reading its event stream (a frozen tab, a hostile
// client) is dropped by the hub once its queue fills; its handler must then
// end and free its connection. serveEvents has no write deadline, so the
// handler stays blocked in Write for as long as the peer keeps the TCP
// connection open (for ever, for a peer that answers zero-window probes),
// and Console.Close does not end it either (so http.Server.Shutdown waits
// for its whole deadline).
func TestAStalledEventStreamIsReleased(t *testing.T) {
	f, c, _ := startFakeCtl(t, Options{WatchInterval: time.Second, StaleAfter: 3 * time.Second})
	var active atomic.Int32
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		c.ServeHTTP(w, r)
	}))
	hs.Listener = smallBufListener{hs.Listener}
	hs.Start()
	t.Cleanup(hs.Close)

	// A client that sends its request and never reads (tiny receive buffer).
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	conn, err := d.DialContext(context.Background(), "tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /console/events HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); active.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the events handler never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Cluster changes: each a patch for the page, until the hub drops it.
	dropped := false
	for i := int64(0); i < 2000 && !dropped; i++ {
		f.msgs <- watchMsg("a-topic-with-a-rather-long-name-to-make-patches-bigger", i)
		if i%50 == 49 {
			time.Sleep(50 * time.Millisecond)
			c.hub.mu.Lock()
			dropped = len(c.hub.subs) == 0
			c.hub.mu.Unlock()
		}
	}
	if !dropped {
		t.Fatal("the hub never dropped the stalled page (test setup)")
	}
	t.Logf("the hub dropped the stalled page's stream; waiting for its handler to end")
	for deadline := time.Now().Add(15 * time.Second); active.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if n := active.Load(); n != 0 {
		_ = c.Close()
		time.Sleep(500 * time.Millisecond)
		t.Fatalf("15 s after the hub dropped the stalled stream, %d events handler(s) still hold their goroutine and connection, blocked in Write (still %d after Console.Close)", n, active.Load())
	}
}

package gateway

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// frozenCaller opens path on the gateway over a connection whose caller
// never reads: its receive buffer is as small as the kernel allows, so once
// the answer's first bytes fill it, the caller's window stays closed and
// whatever the gateway sends next waits unacknowledged, as for a caller
// whose network vanished.
func frozenCaller(t *testing.T, g *Gateway, path string) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, g.Addr()); err != nil {
		t.Fatal(err)
	}
}

// A records:follow or console event stream whose caller stopped
// acknowledging gives its slot (tidemark_gateway_streams_open) back within
// about --http.peer.timeout.ms. The slot was held until the kernel gave up
// retransmitting (a vanished caller: about 15 minutes) or for ever (a
// caller that acknowledges but never reads): the stream's writes were
// small enough for the send buffer, so no write deadline ever fired.
func TestStreamsOfAFrozenCallerAreReleased(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("frozen", 1, 1, nil)
	g := startGateway(t, tc, func(o *Options) {
		o.PeerTimeout = 2 * time.Second
		o.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	api := newREST(t, g)
	metricsURL := "http://" + g.tel.MetricsAddr() + "/metrics"
	open := func() float64 { return sampleSum(scrape(t, metricsURL), "tidemark_gateway_streams_open", nil) }
	// Records far larger than the frozen caller's receive buffer, far
	// smaller than the gateway's send buffer.
	big := strings.Repeat("x", 32<<10)
	succeedsSoon(t, api, http.MethodPost, "/v1/topics/frozen/partitions/0/records", produceBody(1, big, big, big, big))

	for name, path := range map[string]string{
		"follow":  "/v1/topics/frozen/partitions/0/records:follow?offset=0",
		"console": "/console/events",
	} {
		t.Run(name, func(t *testing.T) {
			before := open()
			frozenCaller(t, g, path)
			waitFor(t, 10*time.Second, path+" open", func() bool { return open() == before+1 })
			// The bound is the peer timeout plus the kernel's zero-window
			// probe backoff; the slack is for a loaded machine.
			waitFor(t, 30*time.Second, path+" of the frozen caller given back", func() bool { return open() == before })
		})
	}
}

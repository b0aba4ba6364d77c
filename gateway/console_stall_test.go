package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

// The same for the console's routes (served outside limitBody): a GET whose
// declared body never arrives is never answered (net/http reads the unread
// body before writing the header) and Stop waits for it.
func TestAStalledConsoleRequestBodyIsTimedOut(t *testing.T) {
	old := bodyReadTimeout
	bodyReadTimeout = 300 * time.Millisecond
	t.Cleanup(func() { bodyReadTimeout = old })
	o := DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.TLS = tlsconf.Plain()
	o.Controllers, o.Brokers = config.StringList{"127.0.0.1:1"}, config.StringList{"127.0.0.1:1"}
	g, err := Start(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /console/api/config HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{", g.Addr())
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
		t.Errorf("no answer within 3 s to a console GET whose body stalled: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop with a stalled console request open: %v", err)
	}
}

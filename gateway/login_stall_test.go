package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

// A body must arrive within bodyReadTimeout (limit.go): a stalled one held
// its goroutine and a graceful stop for ever. POST /v1/login (the console's
// login form) is routed beside /v1/, outside limitBody, so a login whose body
// never comes holds its goroutine and connection, and Stop waits its whole
// deadline for it.
func TestAStalledLoginBodyIsTimedOut(t *testing.T) {
	old := bodyReadTimeout
	bodyReadTimeout = 300 * time.Millisecond
	t.Cleanup(func() { bodyReadTimeout = old })
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("0123456789abcdef0123 alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.TLS = tlsconf.Plain()
	o.Auth.Required, o.Auth.TokensFile = true, tokens
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
	fmt.Fprintf(conn, "POST /v1/login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"token\":", g.Addr())
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("no answer within 3 s to a login whose body stalled (bodyReadTimeout %s): %v", bodyReadTimeout, err)
	} else if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a stalled login body: %d, want 408", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop with a stalled login open: %v after %s", err, time.Since(start).Round(time.Millisecond))
	}
}

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

// A body must arrive within bodyReadTimeout (limit.go) on the routes served
// beside /v1/ too: POST /v1/login (answered 408) and the console's (a GET
// that declares a body: net/http reads what is left of it before writing
// the header). A stalled one held its goroutine and a graceful stop.
func TestAStalledBodyIsTimedOutOnLoginAndConsoleRoutes(t *testing.T) {
	old := bodyReadTimeout
	bodyReadTimeout = 300 * time.Millisecond
	t.Cleanup(func() { bodyReadTimeout = old })
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("0123456789abcdef0123 alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, head string
		auth       bool
		status     int // 0: any answer
	}{
		{"login", "POST /v1/login HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", true, http.StatusRequestTimeout},
		{"console", "GET /console/api/config HTTP/1.1\r\nContent-Length: 100\r\n", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Listen = "127.0.0.1:0"
			o.TLS = tlsconf.Plain()
			if c.auth {
				o.Auth.Required, o.Auth.TokensFile = true, tokens
			}
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
			fmt.Fprintf(conn, "%sHost: %s\r\n\r\n{", c.head, g.Addr())
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Errorf("no answer within 3 s to a request whose body stalled: %v", err)
			} else if c.status != 0 && resp.StatusCode != c.status {
				t.Errorf("a stalled body: %d, want %d", resp.StatusCode, c.status)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := g.Stop(ctx); err != nil {
				t.Fatalf("Stop with a stalled request open: %v", err)
			}
		})
	}
}

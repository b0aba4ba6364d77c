package console_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"tidemark.io/gateway"
	"tidemark.io/gateway/internal/resterr"
)

// Every REST and console error is one JSON body (README: resterr). Paths
// under /console/ that the console does not serve, and console views asked
// with another method, answer text/plain from the console's catch-all.
func TestConsoleErrorsAreJSON(t *testing.T) {
	base := serveGateway(t, nil, gateway.ConsoleOptions{})
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/console/"},
		{http.MethodGet, "/console/nope"},
		{http.MethodGet, "/console/events/"},
		{http.MethodPost, "/console/events"},
		{http.MethodDelete, "/console/events"},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, bytes.NewReader([]byte("{}")))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ct := resp.Header.Get("Content-Type")
		if !strings.HasPrefix(ct, "application/json") || resterr.CheckShape(raw) != nil {
			t.Errorf("%s %s: %d %q, not the JSON error body: %q", c.method, c.path, resp.StatusCode, ct, strings.TrimSpace(string(raw)))
		}
	}
}

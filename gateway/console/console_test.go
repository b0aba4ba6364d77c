package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tidemark.io/gateway/console"
	"tidemark.io/gateway/internal/resterr"
)

// Without EnableActions every action is refused with 403 and a JSON error;
// the page, its assets and the read-only API are served.
func TestActionsRefusedWhenNotEnabled(t *testing.T) {
	c, err := console.New(console.Options{Controllers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	srv := newServer(t, c)

	for _, path := range []string{
		"/console/api/produce", "/console/api/brokers/1/kill", "/console/api/faults",
		"/console/api/faults/clear", "/console/api/topics/t/configs", "/console/api/elections",
	} {
		code, e := post(t, srv, path, map[string]any{}, nil)
		if code != http.StatusForbidden || e.Name != "POLICY_VIOLATION" || e.Code != 44 || !strings.Contains(e.Message, "disabled") {
			t.Errorf("POST %s: %d %+v, want 403 POLICY_VIOLATION", path, code, e)
		}
	}

	for path, want := range map[string]string{
		"/":                           "text/html",
		"/console/static/app.js":      "text/javascript",
		"/console/static/bars.js":     "text/javascript",
		"/console/static/console.css": "text/css",
		"/favicon.ico":                "image/svg+xml",
		"/console/api/config":         "application/json",
	} {
		resp, err := http.Get(srv + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || len(body) == 0 {
			t.Errorf("GET %s: %d %q (%d bytes), want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), want)
		}
		if path == "/console/api/config" {
			var f struct{ Actions, NodeActions bool }
			if err := json.Unmarshal(body, &f); err != nil || f.Actions || f.NodeActions {
				t.Errorf("config %s: actions must be off", body)
			}
		}
	}
	resp, err := http.Get(srv + "/console/api/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("unknown API path: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// Enabled, but without a launcher address: node actions are refused,
	// and a cross-site form post or a non-JSON body is refused too.
	c2, err := console.New(console.Options{Controllers: []string{"127.0.0.1:1"}, EnableActions: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	srv2 := newServer(t, c2)
	if code, e := post(t, srv2, "/console/api/brokers/1/kill", map[string]any{}, nil); code != http.StatusForbidden || !strings.Contains(e.Message, "dev launcher") {
		t.Errorf("node action without a launcher: %d %+v", code, e)
	}
	req, _ := http.NewRequest(http.MethodPost, srv2+"/console/api/produce", strings.NewReader("topic=t"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("form post: %v %v", resp, err)
	}
	req, _ = http.NewRequest(http.MethodPost, srv2+"/console/api/produce", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://elsewhere.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin post: %v %v", resp, err)
	}
	if _, err := console.New(console.Options{Controllers: []string{"x:1"}, JaegerUI: "not a url"}); err == nil {
		t.Error("a bad Jaeger UI URL was accepted")
	}
}

// A cluster that cannot be reached is reported as such, on the stream and
// by the state API.
func TestUnreachableCluster(t *testing.T) {
	c, err := console.New(console.Options{Controllers: []string{"127.0.0.1:1"}, StaleAfter: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	srv := newServer(t, c)
	s := openSSE(t, srv)
	s.next("hello", 2*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := s.next("status", time.Until(deadline))
		var st struct {
			Connected bool
			Message   string
		}
		if err := json.Unmarshal(ev.data, &st); err != nil {
			t.Fatal(err)
		}
		if !st.Connected && strings.Contains(st.Message, "cannot reach the cluster") && strings.Contains(st.Message, "127.0.0.1:1") {
			break
		}
	}
	resp, err := http.Get(srv + "/console/api/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e apiErr
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusServiceUnavailable || e.Name == "" {
		t.Fatalf("state of an unreachable cluster: %d %+v %v", resp.StatusCode, e, err)
	}
}

// TestErrorsShareTheRESTShape checks that the console's errors, of every
// kind (refused by policy, bad media type, unknown API, bad input, no
// cluster), have the REST API's one body, resterr.Body.
func TestErrorsShareTheRESTShape(t *testing.T) {
	c, err := console.New(console.Options{Controllers: []string{"127.0.0.1:1"}, StaleAfter: 300 * time.Millisecond, EnableActions: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	srv := newServer(t, c)
	check := func(what string, resp *http.Response, wantStatus int) {
		t.Helper()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantStatus {
			t.Errorf("%s: status %d, want %d: %s", what, resp.StatusCode, wantStatus, raw)
		}
		if err := resterr.CheckShape(raw); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	resp, err := http.Post(srv+"/console/api/produce", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	check("text body", resp, http.StatusUnsupportedMediaType)
	resp, err = http.Get(srv + "/console/api/nothing")
	if err != nil {
		t.Fatal(err)
	}
	check("unknown API", resp, http.StatusNotFound)
	resp, err = http.Get(srv + "/console/api/state")
	if err != nil {
		t.Fatal(err)
	}
	check("no cluster", resp, http.StatusServiceUnavailable)
	req, _ := http.NewRequest(http.MethodPost, srv+"/console/api/produce", strings.NewReader(`{"topic":""}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://elsewhere.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	check("cross origin", resp, http.StatusForbidden)
	code, _ := post(t, srv, "/console/api/produce", map[string]any{"topic": ""}, nil) // post checks the shape
	if code < 400 {
		t.Errorf("produce with no topic: %d", code)
	}
}

// newServer serves a console on a loopback port. Cleanup closes the console
// first: its event streams end, so the server's Close does not wait for them.
func newServer(t *testing.T, c *console.Console) string {
	t.Helper()
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		_ = c.Close()
		srv.Close()
	})
	return srv.URL
}

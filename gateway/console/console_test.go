package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tidemark.io/gateway"
	"tidemark.io/gateway/console"
	"tidemark.io/gateway/internal/resterr"
)

// The console's old action API is gone (404: the actions are the REST
// routes under /v1). Without --console.actions, the demonstration routes
// the buttons call (fault injection, the dev launcher) are refused with
// 403, as the console's actions were; the page, its assets and the views
// are served.
func TestActionsRefusedWhenNotEnabled(t *testing.T) {
	srv := serveGateway(t, nil, gateway.ConsoleOptions{})

	for _, path := range []string{
		"/console/api/produce", "/console/api/brokers/1/kill", "/console/api/faults",
		"/console/api/faults/clear", "/console/api/topics/t/configs", "/console/api/elections",
		"/console/api/scenarios/walk/run", "/console/api/scenarios/cancel",
	} {
		if code, e := post(t, srv, path, map[string]any{}, nil); code != http.StatusNotFound || e.Name != "INVALID_REQUEST" {
			t.Errorf("POST %s: %d %+v, want 404: the console's action API is gone", path, code, e)
		}
	}
	for path, body := range map[string]any{
		"/v1/brokers/1/faults":          map[string]any{"fault": map[string]any{"stall": true}},
		"/v1/brokers/1/faults:clear":    map[string]any{},
		"/v1/dev/nodes/broker-1:action": map[string]any{"action": "ACTION_KILL"},
		"/v1/dev/scenarios/walk:run":    map[string]any{},
	} {
		code, e := post(t, srv, path, body, nil)
		if code != http.StatusForbidden || e.Name != "POLICY_VIOLATION" || e.Code != 44 || !strings.Contains(e.Message, "--console.actions") {
			t.Errorf("POST %s: %d %+v, want 403 POLICY_VIOLATION", path, code, e)
		}
	}
	for _, path := range []string{"/v1/brokers/1/faults", "/v1/dev/nodes", "/v1/dev/scenarios"} {
		resp, err := http.Get(srv + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), "POLICY_VIOLATION") {
			t.Errorf("GET %s: %d %s, want 403 POLICY_VIOLATION", path, resp.StatusCode, raw)
		}
	}

	for path, want := range map[string]string{
		"/":                           "text/html",
		"/console/static/app.js":      "text/javascript",
		"/console/static/api.js":      "text/javascript",
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
		if path == "/console/static/api.js" && (strings.Contains(string(body), "/console/api/produce") || !strings.Contains(string(body), "/v1/elect-leaders")) {
			t.Errorf("api.js does not call the REST API under /v1")
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
	srv2 := serveGateway(t, nil, gateway.ConsoleOptions{Actions: true})
	if code, e := post(t, srv2, "/v1/dev/nodes/broker-1:action", map[string]any{"action": "ACTION_KILL"}, nil); code != http.StatusForbidden || !strings.Contains(e.Message, "dev launcher") {
		t.Errorf("node action without a launcher: %d %+v", code, e)
	}
	req, _ := http.NewRequest(http.MethodPost, srv2+"/v1/brokers/1/faults", strings.NewReader("fault=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("form post: %v %v", resp, err)
	}
	req, _ = http.NewRequest(http.MethodPost, srv2+"/v1/brokers/1/faults:clear", strings.NewReader("{}"))
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

// TestErrorsShareTheRESTShape checks that the console's own errors (unknown
// API, no cluster) have the REST API's one body, resterr.Body. (Its actions
// are REST calls; gateway's tests check their errors.)
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
	resp, err := http.Get(srv + "/console/api/nothing")
	if err != nil {
		t.Fatal(err)
	}
	check("unknown API", resp, http.StatusNotFound)
	resp, err = http.Get(srv + "/console/api/state")
	if err != nil {
		t.Fatal(err)
	}
	check("no cluster", resp, http.StatusServiceUnavailable)
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

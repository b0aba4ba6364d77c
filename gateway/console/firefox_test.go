package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"tidemark.io/gateway"
	"tidemark.io/services/platform/testenv"
)

// firefoxPath finds a Firefox to drive (Debian's firefox-esr). Without one
// the test is skipped, unless CI is set.
func firefoxPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TIDEMARK_FIREFOX"); p != "" {
		return p
	}
	for _, name := range []string{"firefox-esr", "firefox"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "a Firefox (firefox-esr or firefox on PATH)", "apt-get install -y firefox-esr, or set TIDEMARK_FIREFOX")
	return ""
}

// bidi is a minimal WebDriver BiDi client: the protocol Firefox speaks on
// its remote debugging port (it dropped the Chrome protocol chromedp uses).
type bidi struct {
	mu   sync.Mutex
	conn *websocket.Conn
	next int
	ctx  string // the browsing context (tab)
}

func (b *bidi) call(method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	id := b.next
	if err := b.conn.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return nil, err
	}
	_ = b.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg struct {
			ID      int             `json:"id"`
			Type    string          `json:"type"`
			Result  json.RawMessage `json:"result"`
			Error   string          `json:"error"`
			Message string          `json:"message"`
		}
		if err := b.conn.ReadJSON(&msg); err != nil {
			return nil, err
		}
		if msg.ID != id {
			continue // an event, or an answer to someone else
		}
		if msg.Type == "error" {
			return nil, fmt.Errorf("%s: %s: %s", method, msg.Error, msg.Message)
		}
		return msg.Result, nil
	}
}

// openFirefox starts a headless Firefox with WebDriver BiDi and opens a
// session on its first tab.
func openFirefox(t *testing.T, exe string) *bidi {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, exe, "--headless", "--no-remote", "--profile", t.TempDir(),
		"--remote-debugging-port", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "MOZ_HEADLESS=1")
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	var conn *websocket.Conn
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, _, err = websocket.DefaultDialer.Dial(fmt.Sprintf("ws://127.0.0.1:%d/session", port), nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("firefox's WebDriver BiDi endpoint did not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { conn.Close() })
	b := &bidi{conn: conn}
	if _, err := b.call("session.new", map[string]any{"capabilities": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	tree, err := b.call("browsingContext.getTree", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := json.Unmarshal(tree, &tr); err != nil || len(tr.Contexts) == 0 {
		t.Fatalf("no browsing context: %s %v", tree, err)
	}
	b.ctx = tr.Contexts[0].Context
	if _, err := b.call("browsingContext.setViewport", map[string]any{"context": b.ctx,
		"viewport": map[string]int{"width": 1440, "height": 900}}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bidi) navigate(t *testing.T, url string) {
	t.Helper()
	if _, err := b.call("browsingContext.navigate", map[string]any{"context": b.ctx, "url": url, "wait": "complete"}); err != nil {
		t.Fatal(err)
	}
}

// eval runs a JavaScript expression in the page and returns its value as
// JSON text.
func (b *bidi) eval(t *testing.T, expr string) string {
	t.Helper()
	res, err := b.call("script.evaluate", map[string]any{"expression": expr, "target": map[string]string{"context": b.ctx},
		"awaitPromise": false, "resultOwnership": "none"})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Type   string `json:"type"`
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	if r.Type == "exception" {
		t.Fatalf("page script failed: %s", r.ExceptionDetails)
	}
	return string(r.Result.Value)
}

func (b *bidi) waitFor(t *testing.T, timeout time.Duration, what, cond string) time.Duration {
	t.Helper()
	start := time.Now()
	for b.eval(t, "!!("+cond+")") != "true" {
		if time.Since(start) > timeout {
			t.Fatalf("firefox: timed out after %s waiting for %s; page: %s", timeout, what, b.eval(t, pageSummary))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

func (b *bidi) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	res, err := b.call("browsingContext.captureScreenshot", map[string]any{"context": b.ctx})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// The console in Firefox: the page goes live over server-sent events, shows
// three brokers and the partitions, and after the leader of a partition is
// killed through its button shows the new leader and the shrunk ISR.
func TestFirefox(t *testing.T) {
	testenv.SkipIfShort(t, "drives a headless Firefox")
	exe := firefoxPath(t)
	tc := startCluster(t)
	tc.CreateTopic("orders", 3, 3, map[string]string{"min.insync.replicas": "2"})
	dev := serveDevCluster(t, tc)
	srv := serveGateway(t, tc, gateway.ConsoleOptions{Actions: true, DevControl: dev})
	dir := artifactDir(t)

	b := openFirefox(t, exe)
	b.navigate(t, srv+"/")
	took := b.waitFor(t, 20*time.Second, "three live brokers and three partitions",
		`document.getElementById('conn').dataset.state === 'live' &&
		 document.querySelectorAll('[data-broker][data-state="up"]').length === 3 &&
		 [...document.querySelectorAll('[data-partition]')].filter(e => e.dataset.isr.split(',').length === 3).length === 3`)
	t.Logf("firefox: page live after %s", took.Round(time.Millisecond))
	b.eval(t, `document.querySelector('[data-partition="orders-0"] button[data-action="produce"]').click()`)
	b.waitFor(t, 10*time.Second, "a produce through the page", `document.querySelectorAll('#outcomes li[data-ok="true"]').length >= 1`)
	b.screenshot(t, dir, "firefox-1-healthy")

	leader := b.eval(t, `document.querySelector('[data-partition="orders-0"]').dataset.leader`)
	leader = leader[1 : len(leader)-1] // a JSON string
	b.eval(t, `document.querySelector('[data-broker="`+leader+`"] button[data-action="kill"]').click()`)
	took = b.waitFor(t, 10*time.Second, "the new leader and the ISR without the killed broker",
		`(() => {
		  const p = document.querySelector('[data-partition="orders-0"]');
		  return p.dataset.leader !== `+jsString(leader)+` && p.dataset.leader !== '-1' &&
		    !p.dataset.isr.split(',').includes(`+jsString(leader)+`);
		})()`)
	t.Logf("firefox: after killing B%s the page showed the new leader within %s", leader, took.Round(time.Millisecond))
	b.screenshot(t, dir, "firefox-2-leader-killed")
}

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tidemark.io/gateway"
	"tidemark.io/gateway/console"
	"tidemark.io/services/platform/testenv"
)

// chromiumPath finds a Chromium to drive. Without one the test is skipped,
// unless CI is set: there a missing browser is a failure (testenv).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TIDEMARK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "a Chromium (chromium, chromium-browser, google-chrome or headless-shell on PATH)", "apt-get install -y chromium, or set TIDEMARK_CHROMIUM")
	return ""
}

// artifactDir is where screenshots go: $TIDEMARK_ARTIFACTS/console, or a
// temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("TIDEMARK_ARTIFACTS")
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// page drives one headless Chromium tab.
type page struct {
	t   *testing.T
	ctx context.Context
	dir string

	mu       sync.Mutex
	problems []string // uncaught exceptions and console errors
}

func openBrowser(t *testing.T, exe string) *page {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900), // a laptop screen
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 100*time.Second)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc() // stops the browser process
	})
	p := &page{t: t, ctx: ctx, dir: artifactDir(t)}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// Refused actions answer 4xx/5xx by design; the browser logs those.
			if (strings.Contains(m.URL, "/v1/") || strings.Contains(m.URL, "/console/api/")) && strings.HasPrefix(m.Text, "Failed to load resource") {
				continue
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.screenshot("failed")
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition; on a timeout it saves a screenshot
// and reports the page's view of the partitions.
func (p *page) waitFor(timeout time.Duration, what, cond string) time.Duration {
	p.t.Helper()
	start := time.Now()
	for {
		ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(() => { try { return !!(`+cond+`); } catch (e) { return false; } })()`))
		if err != nil {
			p.t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			p.screenshot("timeout")
			p.t.Fatalf("the page did not show %s within %s; it shows: %s", what, timeout, p.eval(pageSummary))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pageSummary is what the page shows of brokers and partitions, in words.
const pageSummary = `(() => {
  const b = [...document.querySelectorAll('[data-broker]')].map(e => 'B' + e.dataset.broker + '=' + e.dataset.state + '/' + e.dataset.process);
  const p = [...document.querySelectorAll('[data-partition]')].map(e => e.dataset.partition + ' leader ' + e.dataset.leader + ' isr [' + e.dataset.isr + '] ' +
    [...e.querySelectorAll('[data-replica]')].map(r => r.dataset.replica + ':' + r.dataset.status).join(' ') +
    ((b => b && b.disabled ? ' (produce in flight)' : '')(e.querySelector('button[data-action="produce"]'))));
  const o = [...document.querySelectorAll('#outcomes li')].map(e => e.textContent);
  return 'conn=' + document.getElementById('conn').dataset.state + '; ' + b.join(' ') + '; ' + p.join('; ') + '; outcomes: ' + o.join(' | ');
})()`

func (p *page) screenshot(name string) string {
	// From the top, so that the sticky header is where it belongs.
	_ = chromedp.Do(p.ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(p.dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	p.t.Logf("screenshot: %s", path)
	return path
}

// click scrolls to the element and clicks it in one step of the page's
// event loop. A mouse event at coordinates measured a moment earlier (the
// page re-renders on every snapshot, and a broker card's list of led
// partitions can grow a line) sometimes landed beside the button, and the
// click was silently lost.
func (p *page) click(sel string) {
	p.t.Helper()
	p.waitFor(5*time.Second, "an enabled "+sel, `(e => e && !e.disabled)(document.querySelector(`+jsString(sel)+`))`)
	ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(e => {
	  if (!e || e.disabled) return false;
	  e.scrollIntoView({block: 'center'});
	  e.click();
	  return true;
	})(document.querySelector(`+jsString(sel)+`))`))
	if err != nil || !ok {
		p.screenshot("failed")
		p.t.Fatalf("click %s: %v (clicked: %v)", sel, err, ok)
	}
}

func (p *page) checkNoProblems() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.problems {
		// The event stream breaking while the test tears down is not an error of the page.
		if strings.Contains(m, "/console/events") {
			continue
		}
		p.t.Errorf("page console: %s", m)
	}
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }

// The page in headless Chromium against a live in-process cluster: it shows
// the brokers and partitions; killing a partition's leader with its button
// shows the new leader and the shrunk ISR; stalling a follower with its
// button shows it leave the ISR.
func TestBrowser(t *testing.T) {
	testenv.SkipIfShort(t, "drives a headless Chromium")
	exe := chromiumPath(t)
	tc := startCluster(t)
	tc.CreateTopic("orders", 3, 3, map[string]string{"min.insync.replicas": "2"})
	dev := serveDevCluster(t, tc)
	srv := serveGateway(t, tc, gateway.ConsoleOptions{Actions: true, DevControl: dev, JaegerUI: "http://127.0.0.1:16686"})

	p := openBrowser(t, exe)
	p.do("open the console", chromedp.Navigate(srv+"/"))
	took := p.waitFor(15*time.Second, "three live brokers and three partitions",
		`document.getElementById('conn').dataset.state === 'live' &&
		 document.querySelectorAll('[data-broker][data-state="up"]').length === 3 &&
		 [...document.querySelectorAll('[data-partition]')].filter(e => e.dataset.isr.split(',').length === 3).length === 3`)
	t.Logf("page live after %s: %s", took.Round(time.Millisecond), p.eval(pageSummary))
	// Every request the page makes is kept, to check where its actions went.
	p.eval(`performance.setResourceTimingBufferSize(100000), "ok"`)

	// Some records, so that the logs have something to draw.
	for _, part := range []string{"orders-0", "orders-1", "orders-2"} {
		p.click(`[data-partition="` + part + `"] button[data-action="produce"]`)
	}
	p.waitFor(10*time.Second, "three successful produces and the HW moved",
		`document.querySelectorAll('#outcomes li[data-ok="true"]').length === 3 &&
		 [...document.querySelectorAll('[data-partition] [data-replica]')].every(r => r.dataset.leo === '10' && r.dataset.hw === '10')`)
	p.screenshot("1-healthy")

	// A topic config changed with its form, and back.
	for _, minISR := range []string{"1", "2"} {
		p.eval(`(() => {
		  const i = document.querySelector('[data-topic="orders"] input[name="minIsr"]');
		  i.value = ` + jsString(minISR) + `;
		  i.dispatchEvent(new Event("input"));
		  return "ok";
		})()`)
		p.click(`[data-topic="orders"] button[data-action="configs"]`)
		p.waitFor(10*time.Second, "min.insync.replicas "+minISR+" on the topic",
			`document.querySelector('[data-topic="orders"] .meta').textContent.includes('min.insync.replicas `+minISR+` ') &&
			 document.querySelector('#outcomes li[data-ok="true"]').textContent.includes('configs of orders')`)
	}

	// The Groups view: a member that read and committed everything, then
	// the lag of a partition written to since.
	startGroupMember(t, tc, "shipping", "orders", 30)
	p.waitFor(10*time.Second, "the group, its member and no lag",
		`(() => {
		  const g = document.querySelector('[data-group="shipping"]');
		  return g && g.querySelector('.badge').textContent === 'Stable' &&
		    g.querySelectorAll('tr[data-member]').length === 1 &&
		    g.querySelector('tr[data-member]').textContent.includes('orders-0') &&
		    [...g.querySelectorAll('tr[data-group-partition]')].filter(r => r.dataset.lag === '0').length === 3;
		})()`)
	p.click(`[data-partition="orders-2"] button[data-action="produce"]`)
	p.waitFor(10*time.Second, "the lag of orders-2",
		`document.querySelector('[data-group="shipping"] tr[data-group-partition="orders-2"]').dataset.lag === '10'`)
	p.screenshot("1a-groups")

	// Each follower's LEO twice: the tick it reports and the triangle of
	// what its leader knows.
	p.waitFor(5*time.Second, "both LEO marks on every follower of orders-0, none from the leader on the leader",
		`(() => {
		  const rows = [...document.querySelectorAll('[data-partition="orders-0"] [data-replica]')];
		  const f = rows.filter(r => r.dataset.status !== 'leader'), l = rows.filter(r => r.dataset.status === 'leader');
		  return f.length === 2 && l.length === 1 &&
		    f.every(r => r.querySelector('svg [data-mark="leo-own"]') && r.querySelector('svg [data-mark="leo-leader"]') &&
		      r.querySelector('.leader-knows').textContent.includes('leader knows 10')) &&
		    l[0].querySelector('svg [data-mark="leo-own"]') && !l[0].querySelector('svg [data-mark="leo-leader"]');
		})()`)

	// The Scenarios panel lists the launcher's scenarios; one runs with its
	// steps beside the replicas, and is cancelled.
	p.waitFor(5*time.Second, "the scenarios listed",
		`!document.getElementById('scenarios-section').hidden &&
		 [...document.querySelectorAll('#scenarios li[data-scenario]')].map(e => e.dataset.scenario).join(',') === 'walk,lag' &&
		 document.querySelector('#scenarios li[data-scenario="walk"]').textContent.includes('§3.3')`)
	p.click(`#scenarios li[data-scenario="walk"] button[data-action="run-scenario"]`)
	p.waitFor(5*time.Second, "the run's steps and its passed check",
		`document.getElementById('scenario-run').dataset.running === 'true' &&
		 document.querySelector('#scenario-steps li[data-kind="step"]').textContent.includes('step ①') &&
		 document.querySelector('#scenario-steps li[data-kind="check"][data-passed="true"]') !== null &&
		 document.querySelector('#scenarios button[data-action="run-scenario"]').disabled`)
	p.screenshot("1b-scenario-running")
	p.click(`#cancel-scenario`)
	p.waitFor(5*time.Second, "the cancelled run ended",
		`document.getElementById('scenario-run').dataset.running === 'false' &&
		 document.querySelector('#scenario-steps li[data-kind="finished"][data-passed="false"]').textContent.includes('cancelled') &&
		 !document.querySelector('#scenarios button[data-action="run-scenario"]').disabled`)

	// A refusal is shown by its Kafka name.
	p.click(`[data-partition="orders-0"] button[data-action="elect-preferred"]`)
	p.waitFor(5*time.Second, "the refused preferred election",
		`document.querySelector('#outcomes li[data-ok="false"][data-name="ELECTION_NOT_NEEDED"]') !== null`)

	// Kill the leader of orders-0 with its broker's button.
	leader := p.eval(`document.querySelector('[data-partition="orders-0"]').dataset.leader`)
	p.click(`[data-broker="` + leader + `"] button[data-action="kill"]`)
	took = p.waitFor(8*time.Second, "the killed leader down, a new leader and the ISR without it",
		`(() => {
		  const p = document.querySelector('[data-partition="orders-0"]');
		  const L = `+jsString(leader)+`;
		  return document.querySelector('[data-broker="' + L + '"]').dataset.state === 'down' &&
		    p.dataset.leader !== L && p.dataset.leader !== '-1' && !p.dataset.isr.split(',').includes(L) &&
		    p.querySelector('[data-replica="' + L + '"]').dataset.status === 'down' &&
		    p.querySelector('[data-badge="under-replicated"]') !== null;
		})()`)
	t.Logf("after killing B%s the page showed the new leader within %s: %s", leader, took.Round(time.Millisecond), p.eval(pageSummary))
	p.waitFor(5*time.Second, "the kill's outcome and the election in the timeline",
		`document.querySelector('#outcomes li[data-ok="true"]').textContent.includes('kill broker') &&
		 document.querySelector('#timeline li[data-kind="election"], #timeline li[data-kind="isr-shrink"]') !== null`)
	p.screenshot("2-leader-killed")

	// acks=all still works with two in-sync replicas of min ISR 2.
	p.click(`[data-partition="orders-0"] button[data-action="produce"]`)
	p.waitFor(10*time.Second, "a produce to the new leader", `document.querySelector('#outcomes li').dataset.ok === 'true' &&
		document.querySelector('#outcomes li').textContent.includes('orders-0')`)

	// Bring it back.
	p.click(`[data-broker="` + leader + `"] button[data-action="start"]`)
	p.waitFor(15*time.Second, "the restarted broker up and back in every ISR",
		`document.querySelector('[data-broker="`+leader+`"]').dataset.state === 'up' &&
		 [...document.querySelectorAll('[data-partition]')].every(e => e.dataset.isr.split(',').length === 3)`)

	// Stall a follower of orders-1 and write to it: the follower leaves the ISR.
	follower := p.eval(`(() => {
	  const p = document.querySelector('[data-partition="orders-1"]');
	  return p.dataset.replicas.split(',').find(r => r !== p.dataset.leader && r !== ` + jsString(leader) + `) ||
	         p.dataset.replicas.split(',').find(r => r !== p.dataset.leader);
	})()`)
	row := `[data-partition="orders-1"] [data-replica="` + follower + `"]`
	p.click(row + ` button[data-action="stall"]`)
	p.waitFor(5*time.Second, "the stall shown on the follower", `document.querySelector('`+row+` [data-fault="stall"]') !== null`)
	p.do("choose acks=1", chromedp.SetValue(chromedp.CSS(`[data-partition="orders-1"] select[name="acks"]`), "1"))
	p.click(`[data-partition="orders-1"] button[data-action="produce"]`)
	took = p.waitFor(12*time.Second, "the stalled follower out of the ISR",
		`(() => {
		  const p = document.querySelector('[data-partition="orders-1"]');
		  return !p.dataset.isr.split(',').includes(`+jsString(follower)+`) &&
		    document.querySelector('`+row+`').dataset.status === 'out-of-sync';
		})()`)
	t.Logf("stalled B%s left the ISR of orders-1 on the page %s after the produce: %s", follower, took.Round(time.Millisecond), p.eval(pageSummary))
	p.waitFor(5*time.Second, "the ISR shrink in the timeline", `document.querySelector('#timeline li[data-kind="isr-shrink"]') !== null`)
	p.screenshot("3-follower-stalled")

	p.click(row + ` button[data-action="clear"]`)
	p.waitFor(12*time.Second, "the follower back in the ISR",
		`document.querySelector('[data-partition="orders-1"]').dataset.isr.split(',').includes(`+jsString(follower)+`) &&
		 document.querySelector('`+row+` [data-fault]') === null`)

	// A cut link shows on the broker whose requests it drops, and goes
	// when healed (the page has no button for it: the CLI or REST cut it).
	cutLink := func(action string) {
		p.eval(`fetch('/v1/brokers/` + follower + `/links/` + leader + `:` + action + `', {method: 'POST',
		  headers: {'Content-Type': 'application/json', Accept: 'application/json'}, body: '{}'}), 'sent'`)
	}
	card := `document.querySelector('[data-broker="` + follower + `"] [data-faults]')`
	cutLink("cut")
	p.waitFor(5*time.Second, "the cut link shown on the broker", card+` !== null && `+card+`.textContent.includes('cannot reach B`+leader+`')`)
	cutLink("heal")
	p.waitFor(5*time.Second, "the healed link gone from the broker", card+` === null`)

	// Every action went to the REST API under /v1; the page read only the
	// console's views.
	var paths []string
	if err := json.Unmarshal([]byte(p.eval(`JSON.stringify(performance.getEntriesByType("resource").map(e => new URL(e.name).pathname))`)), &paths); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"/v1/topics/orders/partitions/0/records", "/v1/configs:alter", "/v1/elect-leaders",
		"/v1/dev/nodes/broker-" + leader + ":action", "/v1/brokers/" + follower + "/faults",
		"/v1/brokers/" + follower + "/faults:clear", "/v1/dev/scenarios/walk:run",
	} {
		if !slices.Contains(paths, want) {
			t.Errorf("the page never called %s (it called %v)", want, slices.Compact(slices.Sorted(slices.Values(paths))))
		}
	}
	for _, path := range paths {
		if strings.HasPrefix(path, "/console/api/") && !slices.Contains([]string{"/console/api/config", "/console/api/groups", "/console/api/scenarios"}, path) {
			t.Errorf("the page called %s, not a view", path)
		}
	}

	// A console whose controllers cannot be reached says so.
	down, err := console.New(console.Options{Controllers: []string{"127.0.0.1:1"}, StaleAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = down.Close() })
	downURL := newServer(t, down)
	p.do("open a console of an unreachable cluster", chromedp.Navigate(downURL+"/"))
	p.waitFor(8*time.Second, "the unreachable message",
		`document.getElementById('conn').dataset.state === 'unreachable' &&
		 !document.getElementById('banner').hidden &&
		 document.getElementById('banner').textContent.includes('Cluster unreachable') &&
		 document.getElementById('empty').textContent.includes('127.0.0.1:1')`)
	p.screenshot("4-unreachable")
	p.checkNoProblems()
}

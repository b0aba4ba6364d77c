package console_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tidemark.io/gateway"
	"tidemark.io/gateway/console"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/platform/tlsconf"
)

// pageProxy stands between the browser and a console server, as a proxy or
// NAT does: it can forget the event streams' connections without closing
// them (nothing more passes either way, and neither end hears of it), and
// switch to another server (the gateway restarted).
type pageProxy struct {
	lis net.Listener

	mu      sync.Mutex
	target  string // "": refuse connections (the gateway is down)
	conns   map[*proxyConn]struct{}
	streams int // event stream requests seen
}

type proxyConn struct {
	client, server net.Conn
	events         bool // it carried GET /console/events
	frozen         bool
}

func startPageProxy(t *testing.T, target string) *pageProxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pageProxy{lis: lis, target: target, conns: map[*proxyConn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = lis.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for c := range p.conns {
			_ = c.client.Close()
			_ = c.server.Close()
		}
	})
	return p
}

func (p *pageProxy) url() string { return "http://" + p.lis.Addr().String() }

func (p *pageProxy) serve() {
	for {
		cc, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		if target == "" {
			_ = cc.Close()
			continue
		}
		sc, err := net.Dial("tcp", target)
		if err != nil {
			_ = cc.Close()
			continue
		}
		c := &proxyConn{client: cc, server: sc}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.pipe(c, cc, sc, true)
		go p.pipe(c, sc, cc, false)
	}
}

// pipe copies until either side closes; once the connection is frozen it
// reads and drops, as a peer that forgot the flow.
func (p *pageProxy) pipe(c *proxyConn, from, to net.Conn, request bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if request && bytes.Contains(buf[:n], []byte("GET /console/events")) {
				c.events = true
				p.streams++
			}
			frozen := c.frozen
			p.mu.Unlock()
			if !frozen {
				if _, werr := to.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
		}
		if err != nil {
			p.mu.Lock()
			frozen := c.frozen
			p.mu.Unlock()
			if !frozen || err != io.EOF {
				_ = c.client.Close()
				_ = c.server.Close()
			}
			return
		}
	}
}

// freeze makes every connection open now silent for good; it returns how
// many carried an event stream.
func (p *pageProxy) freeze() (streams int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if !c.frozen && c.events {
			streams++
		}
		c.frozen = true
	}
	return streams
}

// retarget sends new connections to target ("": refuse them) and closes
// every connection to the old server.
func (p *pageProxy) retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for c := range p.conns {
		_ = c.client.Close()
		_ = c.server.Close()
		delete(p.conns, c)
	}
}

func (p *pageProxy) eventStreams() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streams
}

// serveQuietConsole serves a console of tc with a short heartbeat.
func serveQuietConsole(t *testing.T, tc *testCluster) (*console.Console, *httptest.Server) {
	t.Helper()
	c, err := console.New(console.Options{Controllers: tc.controllers, Brokers: tc.brokers, Heartbeat: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c)
	t.Cleanup(func() { _ = c.Close(); hs.Close() })
	return c, hs
}

// A page left open while nothing happens, whose connections then die
// without closing (a proxy or NAT forgot them): the cluster changes (its
// leader killed, a group joins) and the page must show it by itself,
// without a reload. EventSource waits on a silent connection for ever, and
// the page showed the dead leader under a "stale" banner until reloaded;
// the Groups view's call on a silent connection never ended, and the view
// asks one call at a time, so it never changed again. Then the
// console server goes away for a while (the gateway restarted) as the
// active controller fails over: the page says it is offline, comes back by
// itself with backoff, and shows the new controller and leader with no
// event twice.
func TestAQuietPageFollowsTheClusterAfterItsStreamDies(t *testing.T) {
	testenv.SkipIfShort(t, "drives a headless Chromium")
	exe := chromiumPath(t)
	tc := startCluster(t)
	tc.CreateTopic("quiet", 1, 3, map[string]string{"min.insync.replicas": "1"})
	_, hs := serveQuietConsole(t, tc)
	proxy := startPageProxy(t, hs.Listener.Addr().String())

	p := openBrowser(t, exe)
	p.do("open the console", chromedp.Navigate(proxy.url()+"/"))
	p.waitFor(15*time.Second, "the partition live with three replicas in sync",
		`document.getElementById('conn').dataset.state === 'live' &&
		 (e => e && e.dataset.isr.split(',').length === 3)(document.querySelector('[data-partition="quiet-0"]'))`)
	p.waitFor(5*time.Second, "the Groups view answered", `document.getElementById('groups-status').textContent === '0 groups'`)
	time.Sleep(2 * time.Second) // a quiet moment, a few heartbeats long

	if n := proxy.freeze(); n != 1 {
		t.Fatalf("%d event streams frozen, want the page's one", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := tc.Produce(ctx, "quiet", 0, -1, "r"+itoa(int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	startGroupMember(t, tc, "late-readers", "quiet", 3)
	leader := tc.Leader("quiet", 0)
	tc.CrashBroker(leader)
	took := p.waitFor(30*time.Second, "the new leader of quiet-0, live, after the stream died silently",
		`(() => {
		  const p = document.querySelector('[data-partition="quiet-0"]');
		  return document.getElementById('conn').dataset.state === 'live' &&
		    p.dataset.leader !== '`+itoa(leader)+`' && p.dataset.leader !== '-1' &&
		    !p.dataset.isr.split(',').includes('`+itoa(leader)+`');
		})()`)
	t.Logf("the page showed the new leader %s after its connections went silent", took.Round(time.Millisecond))
	// The Groups view asks one call at a time: the one that went out on a
	// silent connection must not stop it for good.
	took = p.waitFor(45*time.Second, "the group that joined after the connections went silent",
		`document.querySelector('[data-group="late-readers"]') !== null`)
	t.Logf("the Groups view showed the new group %s later", took.Round(time.Millisecond))
	if n := proxy.eventStreams(); n < 2 {
		t.Fatalf("the page opened %d event streams, want a second after the first went silent", n)
	}

	// The console server goes away; meanwhile the active controller fails over.
	active, _ := tc.ActiveController()
	proxy.retarget("")
	p.waitFor(10*time.Second, "the page offline, retrying",
		`document.getElementById('conn').dataset.state === 'offline' &&
		 document.getElementById('banner').textContent.includes('Retrying')`)
	tc.StopController(active)
	tc.WaitFor(20*time.Second, "another active controller", func() bool {
		id, _ := tc.ActiveController()
		return id >= 0 && id != active
	})
	next, _ := tc.ActiveController()
	_, hs2 := serveQuietConsole(t, tc)
	proxy.retarget(hs2.Listener.Addr().String())
	took = p.waitFor(40*time.Second, "the page live on the new server with the new controller",
		`document.getElementById('conn').dataset.state === 'live' &&
		 document.querySelector('[data-controller]').dataset.controller === '`+itoa(next)+`' &&
		 document.querySelector('[data-partition="quiet-0"]').dataset.leader !== '`+itoa(leader)+`'`)
	t.Logf("the page came back live %s after the new server started: %s", took.Round(time.Millisecond), p.eval(pageSummary))
	dups := p.eval(`(() => {
	  const seen = new Set(), dups = [];
	  for (const li of document.querySelectorAll('#timeline li[data-kind]')) {
	    if (seen.has(li.textContent)) dups.push(li.textContent);
	    seen.add(li.textContent);
	  }
	  return dups.join(' | ');
	})()`)
	if dups != "" {
		t.Errorf("the timeline shows events twice: %s", dups)
	}
	p.screenshot("quiet-recovered")
	// Connections cut under the page fail its loads; nothing else may fail.
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.problems {
		if !strings.Contains(m, "Failed to load resource") {
			t.Errorf("page console: %s", m)
		}
	}
}

func itoa(id int32) string { return strconv.Itoa(int(id)) }

// startGatewayAt starts a gateway with the console's actions and the dev
// launcher dev; Stop is the caller's.
func startGatewayAt(t *testing.T, tc *testCluster, dev string) *gateway.Gateway {
	t.Helper()
	o := gateway.DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.TLS = tlsconf.Plain()
	o.Controllers, o.Brokers = config.StringList(tc.controllers), config.StringList(tc.brokers)
	o.Console = gateway.ConsoleOptions{Actions: true, DevControl: dev}
	g, err := gateway.Start(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	return g
}

func stopGateway(t *testing.T, g *gateway.Gateway) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Errorf("stop gateway: %v", err)
	}
}

// A scenario runs, started from the page, when the gateway restarts: the
// run ends with the gateway (its stream to the launcher closes, and the
// launcher cancels it), and the restarted gateway follows no run. The page
// came back live yet still showed the run "running…" with every Run button
// disabled, until reloaded.
func TestARunEndedWithItsGatewayIsNotShownRunning(t *testing.T) {
	testenv.SkipIfShort(t, "drives a headless Chromium")
	exe := chromiumPath(t)
	tc := startCluster(t)
	scen := newFakeScenarios()
	dev := serveDevClusterWith(t, tc, scen)
	g1 := startGatewayAt(t, tc, dev)
	proxy := startPageProxy(t, g1.Addr())

	p := openBrowser(t, exe)
	p.do("open the console", chromedp.Navigate(proxy.url()+"/"))
	p.waitFor(15*time.Second, "the page live with its scenarios", `document.getElementById('conn').dataset.state === 'live' &&
		 document.querySelector('#scenarios button[data-action="run-scenario"]') !== null`)
	p.click(`#scenarios li[data-scenario="walk"] button[data-action="run-scenario"]`)
	p.waitFor(10*time.Second, "the run going", `document.getElementById('scenario-run').dataset.running === 'true'`)

	proxy.retarget("")
	stopGateway(t, g1)
	select {
	case <-scen.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the launcher's run was not cancelled when its gateway stopped")
	}
	g2 := startGatewayAt(t, tc, dev)
	t.Cleanup(func() { stopGateway(t, g2) })
	proxy.retarget(g2.Addr())
	p.waitFor(40*time.Second, "the page live on the restarted gateway", `document.getElementById('conn').dataset.state === 'live'`)
	took := p.waitFor(5*time.Second, "no run shown running and the Run buttons enabled",
		`document.getElementById('scenario-run').dataset.running !== 'true' &&
		 [...document.querySelectorAll('#scenarios button[data-action="run-scenario"]')].every(b => !b.disabled)`)
	t.Logf("the page showed no run going %s after it came back live", took.Round(time.Millisecond))
}

package console_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tidemark.io/gateway"
	"tidemark.io/services/platform/testenv"
)

// A broker whose process is STOPPING (a graceful stop under way, up to
// 30 s) says so on its card, and none of its process buttons is enabled
// until the stop has ended: a restart or a second stop clicked meanwhile
// would only queue behind it.
func TestBrowserDisablesAStoppingBrokersButtons(t *testing.T) {
	testenv.SkipIfShort(t, "drives a headless Chromium")
	exe := chromiumPath(t)
	tc := startCluster(t)
	dev, launcher := serveFakeLauncher(t, tc, newFakeScenarios())
	srv := serveGateway(t, tc, gateway.ConsoleOptions{Actions: true, DevControl: dev})

	p := openBrowser(t, exe)
	p.do("open the console", chromedp.Navigate(srv+"/"))
	p.waitFor(15*time.Second, "three live brokers with enabled stop buttons",
		`document.querySelectorAll('[data-broker][data-state="up"]').length === 3 &&
		 !document.querySelector('[data-broker="2"] button[data-action="stop"]').disabled`)

	launcher.mu.Lock()
	launcher.stopping[2] = true
	launcher.mu.Unlock()
	p.waitFor(15*time.Second, "broker 2 shown stopping, every process button disabled",
		`(e => e && e.dataset.process === 'stopping' &&
		   [...e.querySelectorAll('button')].filter(b => ['stop','kill','start','restart','pause','resume'].includes(b.dataset.action)).length > 0 &&
		   [...e.querySelectorAll('button')].filter(b => ['stop','kill','start','restart','pause','resume'].includes(b.dataset.action)).every(b => b.disabled))
		 (document.querySelector('[data-broker="2"]'))`)

	launcher.mu.Lock()
	delete(launcher.stopping, 2)
	launcher.mu.Unlock()
	p.waitFor(15*time.Second, "broker 2 running again, its stop button enabled",
		`(e => e && e.dataset.process === 'running' && !e.querySelector('button[data-action="stop"]').disabled)
		 (document.querySelector('[data-broker="2"]'))`)
	p.checkNoProblems()
}

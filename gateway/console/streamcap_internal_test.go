package console

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// Each event stream costs a goroutine, a 256-message queue, a 32 KiB
// writer, a connection and a share of every fan-out; nothing bounds how many
// one caller (or all callers) may hold open. 1,000 streams from one caller
// are all accepted.
func TestEventStreamsAreBounded(t *testing.T) {
	f, c, hs := startFakeCtl(t, Options{WatchInterval: time.Second, StaleAfter: 3 * time.Second})
	f.msgs <- watchMsg("t", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: -1}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	const n = 1000
	accepted := 0
	for range n {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/console/events", nil)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			accepted++
			defer resp.Body.Close()
		} else {
			resp.Body.Close()
		}
	}
	c.hub.mu.Lock()
	subs := len(c.hub.subs)
	c.hub.mu.Unlock()
	if accepted == n {
		t.Fatalf("all %d event streams of one caller were accepted (%d subscribers in the hub): no limit per user or in total", n, subs)
	}
}

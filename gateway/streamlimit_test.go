package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/services/platform/kerr"
)

// REST streams are bounded per caller: past the limit a follow or a watch
// is refused with 429 THROTTLING_QUOTA_EXCEEDED naming the streams, with
// Retry-After (expectError checks it), and a stream that ends gives its
// place back.
func TestRESTStreamsAreBoundedPerCaller(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("capped", 1, 3, nil)
	api := newREST(t, startGateway(t, tc, func(o *Options) { o.MaxStreamsPerUser = 2 }))
	const follow = "/v1/topics/capped/partitions/0/records:follow?offset=0"
	if a := api.do(http.MethodPost, "/v1/topics/capped/partitions/0/records", produceBody(-1, "x")); a.status != http.StatusOK {
		t.Fatalf("produce: %d %s", a.status, a.body)
	}
	var closers []func()
	for i := range 2 {
		resp, closeBody := api.open(http.MethodGet, follow, nil)
		closers = append(closers, closeBody)
		t.Cleanup(closeBody)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("follow %d: status %d", i, resp.StatusCode)
		}
	}
	if eb := api.fails(http.MethodGet, follow, nil, http.StatusTooManyRequests, "THROTTLING_QUOTA_EXCEEDED"); eb.Field != "streams" {
		t.Fatalf("a third follow refused naming %q, want streams", eb.Field)
	}
	api.fails(http.MethodGet, "/v1/cluster:watch", nil, http.StatusTooManyRequests, "THROTTLING_QUOTA_EXCEEDED")
	if a := api.do(http.MethodGet, "/v1/topics/capped/partitions/0/records?offset=0", nil); a.status != http.StatusOK {
		t.Fatalf("a fetch with the streams used up: %d %s", a.status, a.body)
	}
	closers[0]()
	waitFor(t, 10*time.Second, "a follow once one ended", func() bool {
		resp, closeBody := api.open(http.MethodGet, follow, nil)
		defer closeBody()
		return resp.StatusCode == http.StatusOK
	})
}

// The limits count each user apart, and all users together.
func TestStreamSlotsCountPerUserAndInAll(t *testing.T) {
	s := newStreamSlots(2, 3)
	as := func(user string) (context.Context, context.CancelFunc) {
		return context.WithCancel(restauth.WithUser(context.Background(), user))
	}
	a1, endA1 := as("alice")
	a2, _ := as("alice")
	a3, _ := as("alice")
	b1, _ := as("bob")
	b2, _ := as("bob")
	for i, ctx := range []context.Context{a1, a2, b1} {
		if err := s.acquire(ctx, "test"); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if err := s.acquire(a3, "test"); kerr.CodeOf(err) != kerr.ThrottlingQuotaExceeded {
		t.Fatalf("alice's third stream: %v, want THROTTLING_QUOTA_EXCEEDED", err)
	}
	if err := s.acquire(b2, "test"); kerr.CodeOf(err) != kerr.ThrottlingQuotaExceeded {
		t.Fatalf("bob's second stream past the total: %v, want THROTTLING_QUOTA_EXCEEDED", err)
	}
	endA1()
	deadline := time.Now().Add(5 * time.Second)
	for s.acquire(b2, "test") != nil {
		if time.Now().After(deadline) {
			t.Fatal("an ended stream did not give its place back")
		}
		time.Sleep(time.Millisecond)
	}
}

// A console page's event stream is a stream like a follow or a watch: it
// counts in tidemark_gateway_streams_open and takes a place under
// --http.max.streams.per.user and --http.max.streams, given back when the
// page goes.
func TestConsoleEventStreamsCountWithRESTStreams(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, func(o *Options) {
		o.MaxStreamsPerUser = 2
		o.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	api := newREST(t, g)
	metricsURL := "http://" + g.tel.MetricsAddr() + "/metrics"
	open := func() float64 { return sampleSum(scrape(t, metricsURL), "tidemark_gateway_streams_open", nil) }

	var pages []func()
	for i := range 2 {
		resp, closePage := api.open(http.MethodGet, "/console/events", nil)
		t.Cleanup(closePage)
		pages = append(pages, closePage)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("console page %d: status %d", i, resp.StatusCode)
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("%d streams open on the gauge", i+1), func() bool { return open() == float64(i+1) })
	}
	api.fails(http.MethodGet, "/v1/cluster:watch", nil, http.StatusTooManyRequests, "THROTTLING_QUOTA_EXCEEDED")
	if eb := api.fails(http.MethodGet, "/console/events", nil, http.StatusTooManyRequests, "THROTTLING_QUOTA_EXCEEDED"); eb.Field != "streams" {
		t.Fatalf("a third page refused naming %q, want streams", eb.Field)
	}
	pages[0]()
	waitFor(t, 10*time.Second, "the closed page's stream given back", func() bool { return open() == 1 })
	resp, closeWatch := api.open(http.MethodGet, "/v1/cluster:watch", nil)
	defer closeWatch()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a watch once a page closed: status %d", resp.StatusCode)
	}
}

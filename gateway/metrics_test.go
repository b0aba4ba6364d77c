package gateway

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The gateway's /metrics counts requests by method, route and code (a
// follow once it ends), the streams open, and never a label per path.
func TestGatewayMetricsCountRequestsByRoute(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("metered", 1, 3, nil)
	g := startGateway(t, tc, func(o *Options) { o.Telemetry.MetricsListen = "127.0.0.1:0" })
	api := newREST(t, g)
	const records = "/v1/topics/metered/partitions/0/records"
	api.ok(http.MethodPost, records, produceBody(-1, "x"), nil)
	bad := api.do(http.MethodGet, records+"?offset=-7", nil)
	if bad.status < 400 || bad.status >= 500 {
		t.Fatalf("a fetch from offset -7: status %d, want a 4xx", bad.status)
	}
	api.do(http.MethodGet, "/v1/no/such/route/one", nil)
	api.do(http.MethodGet, "/nothing-here-two", nil)

	resp, closeFollow := api.open(http.MethodGet, records+":follow?offset=0", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: status %d", resp.StatusCode)
	}
	metricsURL := "http://" + g.tel.MetricsAddr() + "/metrics"
	waitFor(t, 10*time.Second, "one stream open", func() bool {
		return sampleSum(scrape(t, metricsURL), "tidemark_gateway_streams_open", nil) == 1
	})
	closeFollow()
	const followRoute = "/v1/topics/{topic=*}/partitions/{partition=*}/records:follow"
	waitFor(t, 10*time.Second, "the ended follow counted and its slot given back", func() bool {
		m := scrape(t, metricsURL)
		return sampleSum(m, "tidemark_gateway_streams_open", nil) == 0 &&
			sampleSum(m, "tidemark_gateway_http_requests_total", map[string]string{"route": followRoute, "code": "200"}) == 1
	})

	m := scrape(t, metricsURL)
	const recordsRoute = "/v1/topics/{topic=*}/partitions/{partition=*}/records"
	for _, want := range []map[string]string{
		{"method": "POST", "route": recordsRoute, "code": "200"},
		{"method": "GET", "route": recordsRoute, "code": strconv.Itoa(bad.status)},
		{"method": "GET", "route": "other", "code": "404"},
	} {
		n := 1.0
		if want["route"] == "other" {
			n = 2 // both unknown paths, under one label value
		}
		if got := sampleSum(m, "tidemark_gateway_http_requests_total", want); got != n {
			t.Errorf("requests %v: %v, want %v", want, got, n)
		}
	}
	if got := sampleSum(m, "tidemark_gateway_http_request_duration_seconds_count", map[string]string{"route": followRoute}); got != 0 {
		t.Errorf("a follow stream observed in the duration histogram %v times", got)
	}
	if got := sampleSum(m, "tidemark_gateway_http_request_duration_seconds_count", map[string]string{"route": recordsRoute}); got != 2 {
		t.Errorf("records calls observed %v times, want 2", got)
	}
	for _, s := range m {
		route := s.labels["route"]
		if strings.Contains(route, "metered") || strings.Contains(route, "nothing-here") || strings.Contains(route, "no/such") {
			t.Errorf("a route label holds a path: %s %v", s.name, s.labels)
		}
	}
}

// The method label takes the request's method as sent, and net/http
// accepts any token as a method: a client sending made-up methods made a
// new series per method, for ever (a scan, a broken client). Methods
// outside HTTP's own set count as "other", as the route of an unknown
// path does.
func TestGatewayMetricsMethodLabelIsBounded(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, func(o *Options) { o.Telemetry.MetricsListen = "127.0.0.1:0" })
	api := newREST(t, g)
	for i := range 20 {
		api.do(fmt.Sprintf("PROBE%d", i), "/v1/topics", nil)
		api.do(fmt.Sprintf("SCAN%d", i), "/nothing-here", nil)
	}
	api.do(http.MethodGet, "/v1/topics", nil)
	m := scrape(t, "http://"+g.tel.MetricsAddr()+"/metrics")
	methods := map[string]bool{}
	for _, s := range m {
		if strings.HasPrefix(s.name, "tidemark_gateway_http_request") {
			methods[s.labels["method"]] = true
		}
	}
	for meth := range methods {
		if strings.HasPrefix(meth, "PROBE") || strings.HasPrefix(meth, "SCAN") {
			t.Fatalf("made-up methods each got their own series: method label values %v", slices.Sorted(maps.Keys(methods)))
		}
	}
	if got := sampleSum(m, "tidemark_gateway_http_requests_total", map[string]string{"method": "other"}); got != 40 {
		t.Errorf("requests with made-up methods counted %v times under method=\"other\", want 40", got)
	}
	if got := sampleSum(m, "tidemark_gateway_http_requests_total", map[string]string{"method": "GET", "route": "/v1/topics"}); got != 1 {
		t.Errorf("GET /v1/topics counted %v times, want 1", got)
	}
}

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads /metrics over HTTP, as Prometheus would.
func scrape(t testing.TB, url string) []sample {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v", resp.StatusCode, err)
	}
	var out []sample
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, parseSample(t, line))
	}
	return out
}

// parseSample reads one line of the text format (label values without
// escapes, which the gateway's labels never need).
func parseSample(t testing.TB, line string) sample {
	series, val, _ := strings.Cut(line, " ")
	s := sample{name: series, labels: map[string]string{}}
	if name, rest, ok := strings.Cut(series, "{"); ok {
		s.name = name
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				s.labels[k] = strings.Trim(v, `"`)
			}
		}
	}
	v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
	if err != nil {
		t.Fatalf("sample %q: %v", line, err)
	}
	s.value = v
	return s
}

// sampleSum adds the samples of name whose labels include want.
func sampleSum(m []sample, name string, want map[string]string) float64 {
	var sum float64
next:
	for _, s := range m {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		sum += s.value
	}
	return sum
}

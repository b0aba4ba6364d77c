package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// A records:follow or cluster:watch whose HTTP/2 caller stops reading the
// stream, and keeps its connection (Go's client answers pings), gives its
// slot (tidemark_gateway_streams_open) back once a write has waited the
// write timeout. Once the stream's flow-control window was full the handler
// blocked in Write for ever: TCP stayed healthy, so the peer timeout never
// fired, and the slot was never given back (64 such streams and every
// anonymous caller's stream was refused with 429 until a restart).
func TestStreamsOfAnHTTP2CallerThatStopsReadingAreReleased(t *testing.T) {
	defer func(d time.Duration) { answerWriteTimeout = d }(answerWriteTimeout)
	answerWriteTimeout = time.Second

	tc := startCluster(t)
	tc.CreateTopic("unread", 1, 1, nil)
	g := startGateway(t, tc, func(o *Options) { o.Telemetry.MetricsListen = "127.0.0.1:0" })
	api := newREST(t, g)
	metricsURL := "http://" + g.tel.MetricsAddr() + "/metrics"
	open := func() float64 { return sampleSum(scrape(t, metricsURL), "tidemark_gateway_streams_open", nil) }
	big := strings.Repeat("x", 32<<10) // far more than the caller's window
	succeedsSoon(t, api, http.MethodPost, "/v1/topics/unread/partitions/0/records", produceBody(1, big, big, big, big))

	for name, path := range map[string]string{
		"follow": "/v1/topics/unread/partitions/0/records:follow?offset=0",
		"watch":  "/v1/cluster:watch?intervalMs=100",
	} {
		t.Run(name, func(t *testing.T) {
			cl := unreadingHTTP2Client(t)
			before := open()
			resp := openUnread(t, cl, "http://"+g.Addr()+path)
			// Its headers came, so its slot was taken: see that it is
			// given back while the caller's connection lives on.
			waitFor(t, 20*time.Second, path+" of the caller that stopped reading given back", func() bool { return open() == before })
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Fatal("the unread stream ended cleanly; want it cut")
			}
			if !reusesItsConnection(t, cl, "http://"+g.Addr()+"/healthz") {
				t.Fatal("the caller's connection was closed: the stream, not the connection, must end")
			}
		})
	}
}

// unreadingHTTP2Client speaks HTTP/2 without TLS (the test gateway's
// --plaintext) and grants each stream a 1 KiB window, which a body nobody
// reads never reopens.
func unreadingHTTP2Client(t *testing.T) *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols), HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 1 << 10}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// openUnread opens path and never reads its body.
func openUnread(t *testing.T, cl *http.Client, url string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("GET %s: %s over %s, want 200 over HTTP/2", url, resp.Status, resp.Proto)
	}
	return resp
}

// reusesItsConnection calls url through cl and says whether the call went
// over a connection cl already had.
func reusesItsConnection(t *testing.T, cl *http.Client, url string) bool {
	t.Helper()
	reused := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return reused && resp.StatusCode == http.StatusOK
}

// A follow over HTTP/2 with nothing to send for longer than the write
// timeout goes on: the deadline bounds writes, never the silence between
// them (HTTP/2 resets a stream whose write deadline passes, write pending or
// not).
func TestAQuietHTTP2FollowOutlivesTheWriteTimeout(t *testing.T) {
	defer func(d time.Duration) { answerWriteTimeout = d }(answerWriteTimeout)
	answerWriteTimeout = time.Second
	const silence = 3 * time.Second // three write timeouts without a byte to send

	tc := startCluster(t)
	tc.CreateTopic("quiet", 1, 1, nil)
	g := startGateway(t, tc, nil)
	api := newREST(t, g)
	succeedsSoon(t, api, http.MethodPost, "/v1/topics/quiet/partitions/0/records", produceBody(1, "first"))

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	resp := openUnread(t, &http.Client{Transport: tr}, "http://"+g.Addr()+"/v1/topics/quiet/partitions/0/records:follow?offset=0")
	lines := make(chan string, 16)
	var readErr error
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr = sc.Err() // before close(lines), which publishes it
	}()
	next := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the follow ended waiting for %q: %v", want, readErr)
				}
				if strings.Contains(line, b64(want)) {
					return
				}
			case <-deadline:
				t.Fatalf("no record %q on the follow within 10s", want)
			}
		}
	}
	next("first")
	quiet := time.After(silence)
	for waiting := true; waiting; {
		select {
		case _, ok := <-lines:
			if !ok {
				t.Fatalf("the follow was cut during %v of silence (write timeout %v): %v", silence, answerWriteTimeout, readErr)
			}
		case <-quiet:
			waiting = false
		}
	}
	succeedsSoon(t, api, http.MethodPost, "/v1/topics/quiet/partitions/0/records", produceBody(1, "after the silence"))
	next("after the silence")
}

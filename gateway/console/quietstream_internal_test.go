package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// An event stream lives through a silent controller (frozen, or between
// two elections) longer than the write timeout. The deadline set before
// each flush was never cleared. HTTP/2 resets a stream when its write
// deadline passes, write pending or not: with patches only on cluster
// changes and a ping every 15 s, every page on TLS lost its stream 10 s
// into the silence, reconnected, fetched the whole snapshot again and was
// cut again. Over HTTP/1 the first event after the silence larger than the
// stream's 32 KiB buffer was written through under the passed deadline,
// before the deadline was set again, and failed.
func TestAQuietEventStreamOutlivesTheWriteTimeout(t *testing.T) {
	defer func(d time.Duration) { eventWriteTimeout = d }(eventWriteTimeout)
	eventWriteTimeout = time.Second
	const silence = 3 * time.Second // three write timeouts without a byte to send

	t.Run("HTTP/2", func(t *testing.T) {
		f, c, _ := startFakeCtl(t, Options{WatchInterval: time.Second, StaleAfter: time.Minute, Heartbeat: time.Minute})
		hs := httptest.NewUnstartedServer(c)
		hs.EnableHTTP2 = true
		hs.StartTLS()
		t.Cleanup(hs.Close)
		tr := hs.Client().Transport.(*http.Transport).Clone()
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP2(true) // HTTP/2 or nothing
		t.Cleanup(tr.CloseIdleConnections)
		outlivesSilence(t, f, &http.Client{Transport: tr}, hs.URL, silence, 1)
	})
	t.Run("HTTP/1 with an event larger than the buffer", func(t *testing.T) {
		f, _, hs := startFakeCtl(t, Options{WatchInterval: time.Second, StaleAfter: time.Minute, Heartbeat: time.Minute})
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		outlivesSilence(t, f, &http.Client{Transport: tr}, hs.URL, silence, 500)
	})
}

// outlivesSilence opens an event stream through cl, lets the controller
// send one snapshot of n partitions, stay silent for silence, then move
// every partition's HW: the same stream must carry that patch.
func outlivesSilence(t *testing.T, f *fakeCtl, cl *http.Client, base string, silence time.Duration, n int) {
	f.msgs <- partitionsMsg(n, 1)
	evs, streamErr := openEventsVia(t, cl, base)
	next := func(want string, within time.Duration) rawEvent {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case ev, ok := <-evs:
				if !ok {
					t.Fatalf("the stream ended waiting for %s: %v", want, streamErr())
				}
				if ev.name == want {
					return ev
				}
			case <-deadline:
				t.Fatalf("no %s event within %v", want, within)
			}
		}
	}
	next("snapshot", 10*time.Second)

	// The controller falls silent: nothing to send, and no ping due.
	quiet := time.After(silence)
	for waiting := true; waiting; {
		select {
		case _, ok := <-evs:
			if !ok {
				t.Fatalf("the stream was cut during %v of silence (write timeout %v): %v", silence, eventWriteTimeout, streamErr())
			}
		case <-quiet:
			waiting = false
		}
	}
	f.msgs <- partitionsMsg(n, 2)
	if p := next("patch", 10*time.Second); n > 1 && len(p.data) <= 32<<10 {
		t.Fatalf("the patch is %d bytes, not larger than the stream's buffer (test setup)", len(p.data))
	}
}

// partitionsMsg is a WatchCluster message of partitions t-0 .. t-(n-1), all
// at HW hw.
func partitionsMsg(n int, hw int64) *adminv1.WatchClusterResponse {
	m := watchMsg("t", hw)
	for i := 1; i < n; i++ {
		p := proto.CloneOf(m.Partitions[0])
		p.Partition = int32(i)
		m.Partitions = append(m.Partitions, p)
	}
	return m
}

package console

import (
	"bufio"
	"net/http"
	"time"
)

// eventWriteTimeout bounds one write to a page: a page that stops reading
// (a frozen tab, a hostile client) is dropped by the hub when its queue
// fills, and its handler must not stay blocked in Write for ever. It bounds
// the writes only, never the silence between them (a variable for the
// tests).
var eventWriteTimeout = 10 * time.Second

// serveEvents streams the cluster as Server-Sent Events:
//
//	hello     {actions, nodeActions, devControl, jaegerUI, staleAfterMs, heartbeatMs}
//	status    {connected, message, since, lastSnapshot}
//	snapshot  the whole cluster view (see snapshot in view.go), once, when the stream opens
//	patch     what changed since the previous snapshot or patch (patch.go)
//	events    new timeline entries, oldest first (the retained ones on connect)
//	scenario  the scenario run started from the console, whole, at each step (scenarios.go)
//	ping      {} every heartbeat (Options.Heartbeat)
//
// A stream that falls behind is closed; the page reconnects and gets a
// fresh snapshot. The ping is an event, not an SSE comment, because a page
// sees only events: a stream silent for a few heartbeats is one whose
// connection died without closing (a proxy or NAT that forgot it, a
// suspended laptop), and the page replaces it.
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	s, refusal := c.hub.subscribeStream(r)
	if refusal != nil {
		writeError(w, refusal.status, refusal.body)
		return
	}
	defer c.hub.unsubscribe(s)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	bw := bufio.NewWriterSize(w, 32<<10)
	send := func(write func()) bool {
		// The deadline is set before the first byte (an event larger
		// than bw is written through at once) and cleared after the
		// flush. Left set, it fired on a quiet stream: HTTP/2 resets a
		// stream when its write deadline passes, write pending or not,
		// so every page lost its stream 10 s into a silent controller;
		// over HTTP/1 the next large event was written past it and failed.
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
		write()
		return bw.Flush() == nil && rc.Flush() == nil
	}
	if !send(func() { _, _ = bw.WriteString("retry: 1000\n\n") }) {
		return
	}
	hb := time.NewTicker(c.opts.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case m := <-s.ch:
			ok := send(func() {
				writeEvent(bw, m)
				// Write whatever else is queued before flushing once.
				for more := true; more; {
					select {
					case m := <-s.ch:
						writeEvent(bw, m)
					default:
						more = false
					}
				}
			})
			if !ok {
				return
			}
		case <-hb.C:
			if !send(func() { writeEvent(bw, message{"ping", []byte("{}")}) }) {
				return
			}
		case <-s.gone:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// writeEvent writes one event; data is JSON, which has no raw newlines.
func writeEvent(w *bufio.Writer, m message) {
	_, _ = w.WriteString("event: ")
	_, _ = w.WriteString(m.event)
	_, _ = w.WriteString("\ndata: ")
	_, _ = w.Write(m.data)
	_, _ = w.WriteString("\n\n")
}

package gateway

import (
	"net/http"
	"time"
)

// answerWriteTimeout bounds one write of a REST answer to its caller (a
// variable for the tests).
var answerWriteTimeout = 30 * time.Second

// boundWrites gives each write and flush of an answer answerWriteTimeout to
// complete: the deadline is set before it and cleared after. An HTTP/2
// caller that stops reading a records:follow or cluster:watch but keeps its
// connection (Go's client answers pings) filled the stream's flow-control
// window, and the handler then blocked in Write for ever with its stream
// slot, upstream stream and buffers: TCP stayed healthy, so the peer
// timeout never fired. A write that cannot complete now ends the answer
// (HTTP/2 resets the stream, HTTP/1 loses the connection) and with it the
// request's context, which gives the slot back. Cleared between writes,
// since HTTP/2 resets a stream whose deadline passes even with nothing to
// write: a quiet stream is not a stuck one.
func boundWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := &boundedWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		next.ServeHTTP(bw, r)
		bw.finish()
	})
}

// boundedWriter is a ResponseWriter whose writes and flushes each have
// answerWriteTimeout.
type boundedWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	streamed bool // flushed before the handler returned
}

func (b *boundedWriter) Write(p []byte) (n int, err error) {
	b.within(func() { n, err = b.ResponseWriter.Write(p) })
	return n, err
}

// FlushError is what http.ResponseController.Flush calls.
func (b *boundedWriter) FlushError() (err error) {
	b.streamed = true
	b.within(func() { err = b.rc.Flush() })
	return err
}

func (b *boundedWriter) Flush() { _ = b.FlushError() }

// Unwrap lets http.ResponseController reach the connection (read deadlines).
func (b *boundedWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

func (b *boundedWriter) within(op func()) {
	_ = b.rc.SetWriteDeadline(time.Now().Add(answerWriteTimeout))
	defer func() { _ = b.rc.SetWriteDeadline(time.Time{}) }()
	op()
}

// finish sends what a streamed answer left buffered (a stream's closing
// error line) within the deadline too: net/http sends it after the handler
// returns, with none, and over HTTP/2 a caller that does not read held that
// send and its goroutine for ever. An answer never flushed is left to
// net/http, which then gives it a Content-Length.
func (b *boundedWriter) finish() {
	if b.streamed {
		_ = b.FlushError()
	}
}

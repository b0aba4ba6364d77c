package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// bodyLimit remembers, for one request, whether its body went over the
// limit. The decoder's error reaches the error handler only as text (see
// input.go), so the handler asks the request instead.
type bodyLimit struct {
	limit    int64
	exceeded bool
	timedOut bool // the body did not arrive within bodyReadTimeout
}

type bodyLimitKey struct{}

// limitBody refuses bodies larger than limit: at once when Content-Length
// says so, else as soon as reading passes the limit, so that no body is
// ever read whole first.
func limitBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			// Answer without reading, and do not keep an HTTP/1 connection
			// whose unread body is this large.
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			writeError(w, http.StatusRequestEntityTooLarge, tooLarge(limit))
			return
		}
		st := &bodyLimit{limit: limit}
		body := &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), st: st}
		if r.ContentLength != 0 {
			// A body must arrive within bodyReadTimeout: one that stalled
			// after its headers held its goroutine (and a graceful
			// stop) for ever. Cleared once the body is read, so that
			// nothing cuts the answer of a call that takes long.
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)) == nil {
				body.clearDeadline = func() { _ = rc.SetReadDeadline(time.Time{}) }
			}
		}
		r.Body = body
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyLimitKey{}, st)))
	})
}

// bodyTimedOut reports whether r's body did not arrive within
// bodyReadTimeout.
func bodyTimedOut(r *http.Request) bool {
	st, ok := r.Context().Value(bodyLimitKey{}).(*bodyLimit)
	return ok && st.timedOut
}

// bodyTooLarge reports whether r's body went over the limit, and the limit.
func bodyTooLarge(r *http.Request) (int64, bool) {
	st, ok := r.Context().Value(bodyLimitKey{}).(*bodyLimit)
	if !ok || !st.exceeded {
		return 0, false
	}
	return st.limit, true
}

// bodyReadTimeout bounds the time a request body takes to arrive (a
// variable for the tests).
var bodyReadTimeout = 30 * time.Second

type limitedBody struct {
	io.ReadCloser
	st            *bodyLimit
	clearDeadline func() // set while a read deadline is on the body
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		b.st.exceeded = true
	}
	if err == io.EOF && b.clearDeadline != nil {
		b.clearDeadline()
		b.clearDeadline = nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		b.st.timedOut = true
	}
	return n, err
}

package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
)

// bodyLimit remembers, for one request, whether its body went over the
// limit. The decoder's error reaches the error handler only as text (see
// input.go), so the handler asks the request instead.
type bodyLimit struct {
	limit    int64
	exceeded bool
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
		r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), st: st}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyLimitKey{}, st)))
	})
}

// bodyTooLarge reports whether r's body went over the limit, and the limit.
func bodyTooLarge(r *http.Request) (int64, bool) {
	st, ok := r.Context().Value(bodyLimitKey{}).(*bodyLimit)
	if !ok || !st.exceeded {
		return 0, false
	}
	return st.limit, true
}

type limitedBody struct {
	io.ReadCloser
	st *bodyLimit
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		b.st.exceeded = true
	}
	return n, err
}

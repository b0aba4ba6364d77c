package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/gateway/internal/resterr"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// errorBody is the JSON every REST error answers with (resterr.Body, shared
// with the console).
type errorBody = resterr.Body

func bodyOf(e *kerr.Error) errorBody { return resterr.Of(e) }

// statusClientClosed is what nginx and grpc-gateway answer when the caller
// went away first; nobody reads it.
const statusClientClosed = 499

// errStopped answers calls that arrive while the gateway stops.
var errStopped = kerr.New(kerr.BrokerNotAvailable, "the gateway is stopping")

// httpStatus is the kerr table's HTTP status for a code.
func httpStatus(c kerr.Code) int { return c.HTTPStatus() }

// restError turns whatever failed on the REST path into the *kerr.Error
// to render: a service's ErrorDetail, a bad input found before any call
// (input.go), or the nearest code for a transport failure.
func restError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if _, ok := d.(*commonv1.ErrorDetail); ok {
				return kerr.FromStatus(err) // with what the call got done (Partial), if it says
			}
		}
		if st.Code() == codes.InvalidArgument {
			return inputErrorOf(st.Message())
		}
	}
	return asKerr(err)
}

// errorHandler renders errors as JSON with the Kafka-style code name and
// an HTTP status that fits; 503s and 429s carry Retry-After.
func errorHandler(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if limit, ok := bodyTooLarge(r); ok {
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge(limit))
		return
	}
	if bodyTimedOut(r) { // before the caller's end: the server ends the call on a body's read timeout
		writeError(w, http.StatusRequestTimeout, kerr.New(kerr.RequestTimedOut, "the request body did not arrive within %s", bodyReadTimeout))
		return
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		writeError(w, statusClientClosed, kerr.New(kerr.RequestTimedOut, "the caller went away"))
		return
	}
	var ls *launcherStatus
	if errors.As(err, &ls) {
		writeBody(w, ls.status, ls.body)
		return
	}
	e := restError(err)
	writeError(w, httpStatus(e.Code), e)
}

// streamErrorHandler ends a stream after its first answer: the error line
// carries the ErrorDetail, which the marshaler renders as an errorBody.
func streamErrorHandler(_ context.Context, err error) *status.Status {
	return kerr.ToStatus(restError(err))
}

// routingErrorHandler answers requests no REST route matches.
func routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	switch code {
	case http.StatusNotFound:
		writeError(w, code, kerr.New(kerr.InvalidRequest, "no route for %s %s", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		writeError(w, code, kerr.New(kerr.InvalidRequest, "%s is not allowed on %s", r.Method, r.URL.Path))
	default:
		writeError(w, code, kerr.New(kerr.InvalidRequest, "%s %s: %s", r.Method, r.URL.Path, http.StatusText(code)))
	}
}

func tooLarge(limit int64) *kerr.Error {
	return kerr.New(kerr.RecordListTooLarge, "request body is larger than %d bytes", limit)
}

func writeError(w http.ResponseWriter, status int, e *kerr.Error) { writeBody(w, status, bodyOf(e)) }

func writeBody(w http.ResponseWriter, status int, body errorBody) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	resterr.SetRetryAfter(h, status)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // fails only when the caller is gone
}

package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"tidemark.io/gateway/internal/resterr"
	"tidemark.io/services/platform/kerr"
)

// errorBody is the JSON every console API error answers with: the same
// resterr.Body as the REST API's, so one client reads both.
type errorBody = resterr.Body

// apiError is an error with the HTTP status and body to answer it with.
type apiError struct {
	status int
	body   errorBody
}

func (e *apiError) Error() string { return e.body.Name + ": " + e.body.Message }

// refuse builds an apiError from a Kafka-style code, at the kerr table's
// HTTP status.
func refuse(code kerr.Code, format string, args ...any) *apiError {
	return &apiError{status: code.HTTPStatus(), body: resterr.Of(kerr.New(code, format, args...))}
}

// httpStatus is the kerr table's HTTP status for a code.
func httpStatus(c kerr.Code) int { return c.HTTPStatus() }

// toAPIError turns an error from a tidemark call into its answer: the Kafka
// code and name of the ErrorDetail.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			ke = kerr.New(kerr.RequestTimedOut, "%v", err)
		default:
			ke = kerr.FromStatus(err)
		}
	}
	// The server's own words; the name travels beside them.
	body := resterr.Of(ke)
	if ke.Message == "" {
		body.Message = err.Error()
	}
	return &apiError{status: httpStatus(ke.Code), body: body}
}

// devError turns an error from the dev launcher into its answer
// (resterr.Launcher).
func devError(err error) *apiError {
	if st, body, ok := resterr.Launcher(err); ok {
		return &apiError{status: st, body: body}
	}
	return toAPIError(err)
}

// writeRefusal answers e at status, which may differ from the table's where
// the refusal is about HTTP itself (403 for a disabled action, 415, 404 for
// no such API).
func writeRefusal(w http.ResponseWriter, status int, e *kerr.Error) {
	writeError(w, status, resterr.Of(e))
}

func writeError(w http.ResponseWriter, status int, body errorBody) {
	resterr.SetRetryAfter(w.Header(), status)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

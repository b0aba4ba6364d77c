package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	return refuseAt(code.HTTPStatus(), code, format, args...)
}

// refuseAt is refuse at another status, where HTTP says it better (404 for
// a broker id the cluster does not have).
func refuseAt(status int, code kerr.Code, format string, args ...any) *apiError {
	return &apiError{status: status, body: resterr.Of(kerr.New(code, format, args...))}
}

// badRequest is an INVALID_REQUEST naming the field that was wrong.
func badRequest(field, format string, args ...any) *apiError {
	e := refuse(kerr.InvalidRequest, format, args...)
	e.body.Field = field
	return e
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

// devError turns an error from the dev launcher (plain gRPC statuses) into
// an answer named after the gRPC code. It switches on gRPC codes, not on
// Kafka codes: the dev launcher is not a tidemark service and sends no
// ErrorDetail, so the kerr table has no row to look up.
func devError(err error) *apiError {
	st, ok := status.FromError(err)
	if !ok {
		return toAPIError(err)
	}
	code, httpCode := kerr.UnknownServerError, http.StatusInternalServerError
	switch st.Code() {
	case codes.NotFound:
		httpCode = http.StatusNotFound
	case codes.InvalidArgument:
		code, httpCode = kerr.InvalidRequest, http.StatusBadRequest
	case codes.FailedPrecondition:
		httpCode = http.StatusConflict
	case codes.Unavailable:
		code, httpCode = kerr.NetworkException, http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		code, httpCode = kerr.RequestTimedOut, http.StatusGatewayTimeout
	case codes.Unimplemented:
		code, httpCode = kerr.UnsupportedVersion, http.StatusNotImplemented
	}
	name := strings.ToUpper(codeName(st.Code()))
	return &apiError{status: httpCode, body: errorBody{Code: int(code), Name: name, Message: "dev launcher: " + st.Message(),
		Retriable: st.Code() == codes.Unavailable}}
}

// codeName spells a gRPC code in upper snake case (FAILED_PRECONDITION).
func codeName(c codes.Code) string {
	s := c.String()
	var b strings.Builder
	prevLower := false
	for _, r := range s {
		if prevLower && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		prevLower = r >= 'a' && r <= 'z'
		b.WriteRune(r)
	}
	return b.String()
}

// writeRefusal answers e at status, which may differ from the table's where
// the refusal is about HTTP itself (403 for a disabled action, 415, 404 for
// no such API).
func writeRefusal(w http.ResponseWriter, status int, e *kerr.Error) {
	writeError(w, status, resterr.Of(e))
}

func writeError(w http.ResponseWriter, status int, body errorBody) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

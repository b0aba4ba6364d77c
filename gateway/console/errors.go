package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/gateway/internal/httpstatus"
	"tidemark.io/services/platform/kerr"
)

// errorBody is the JSON every console API error answers with: code and name
// are Kafka's (from the ErrorDetail) when the cluster refused.
type errorBody struct {
	Code      int    `json:"code"`
	Name      string `json:"name"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	Retriable bool   `json:"retriable"`
}

// apiError is an error with the HTTP status and body to answer it with.
type apiError struct {
	status int
	body   errorBody
}

func (e *apiError) Error() string { return e.body.Name + ": " + e.body.Message }

// refuse builds an apiError from a Kafka-style code.
func refuse(status int, code kerr.Code, format string, args ...any) *apiError {
	ke := kerr.New(code, format, args...)
	return &apiError{status: status, body: errorBody{Code: int(code), Name: code.String(), Message: ke.Message, Retriable: code.Retriable()}}
}

// badRequest is an INVALID_REQUEST naming the field that was wrong.
func badRequest(field, format string, args ...any) *apiError {
	e := refuse(http.StatusBadRequest, kerr.InvalidRequest, format, args...)
	e.body.Field = field
	return e
}

// httpStatus picks the HTTP status that fits a Kafka-style code.
func httpStatus(c kerr.Code) int { return httpstatus.For(c) }

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
	msg := ke.Message
	if msg == "" {
		msg = err.Error()
	}
	return &apiError{status: httpStatus(ke.Code), body: errorBody{
		Code: int(ke.Code), Name: ke.Code.String(), Message: msg, Field: ke.Field, Retriable: ke.Code.Retriable()}}
}

// devError turns an error from the dev launcher (plain gRPC statuses) into
// an answer named after the gRPC code.
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

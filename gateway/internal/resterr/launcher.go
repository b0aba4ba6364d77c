package resterr

import (
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// Launcher is the answer to a refusal of the dev launcher
// (DevClusterService), which is not a tidemark service: it sends plain gRPC
// statuses without an ErrorDetail, so the kerr table has no row to look up.
// The Body is named after the gRPC code (FAILED_PRECONDITION) and answered
// at the HTTP status that fits it. ok is false when err is not such a
// status (nil, not a gRPC status, or one carrying tidemark's ErrorDetail,
// e.g. the launcher's authorizer): render it as any other error.
func Launcher(err error) (httpStatus int, b Body, ok bool) {
	st, isStatus := status.FromError(err)
	if err == nil || !isStatus || st.Code() == codes.OK {
		return 0, Body{}, false
	}
	for _, d := range st.Details() {
		if _, isDetail := d.(*commonv1.ErrorDetail); isDetail {
			return 0, Body{}, false
		}
	}
	code, httpStatus := kerr.UnknownServerError, http.StatusInternalServerError
	switch st.Code() {
	case codes.NotFound:
		httpStatus = http.StatusNotFound
	case codes.InvalidArgument:
		code, httpStatus = kerr.InvalidRequest, http.StatusBadRequest
	case codes.FailedPrecondition:
		httpStatus = http.StatusConflict
	case codes.Unavailable:
		code, httpStatus = kerr.NetworkException, http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		code, httpStatus = kerr.RequestTimedOut, http.StatusGatewayTimeout
	case codes.Unimplemented:
		code, httpStatus = kerr.UnsupportedVersion, http.StatusNotImplemented
	}
	return httpStatus, Body{Code: int(code), Name: grpcCodeName(st.Code()), Message: "dev launcher: " + st.Message(),
		Retriable: code.Retriable()}, true
}

// grpcCodeName spells a gRPC code in upper snake case (FAILED_PRECONDITION).
func grpcCodeName(c codes.Code) string {
	var b strings.Builder
	prevLower := false
	for _, r := range c.String() {
		if prevLower && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		prevLower = r >= 'a' && r <= 'z'
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

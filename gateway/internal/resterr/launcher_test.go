package resterr

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/kerr"
)

func TestLauncherNamesPlainStatusesAfterTheirCode(t *testing.T) {
	for _, tc := range []struct {
		code   codes.Code
		status int
		name   string
	}{
		{codes.FailedPrecondition, http.StatusConflict, "FAILED_PRECONDITION"},
		{codes.NotFound, http.StatusNotFound, "NOT_FOUND"},
		{codes.InvalidArgument, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{codes.Unavailable, http.StatusServiceUnavailable, "UNAVAILABLE"},
	} {
		st, b, ok := Launcher(status.Error(tc.code, "broker-1 is not running"))
		if !ok || st != tc.status || b.Name != tc.name || b.Message != "dev launcher: broker-1 is not running" {
			t.Errorf("%v: %v %d %+v, want %d %s", tc.code, ok, st, b, tc.status, tc.name)
		}
		raw, _ := json.Marshal(b)
		if err := CheckShape(raw); err != nil {
			t.Errorf("%v: %v", tc.code, err)
		}
	}
	// tidemark's own refusals (the launcher's authorizer) and other errors
	// are not the launcher's to name.
	for _, err := range []error{nil, errors.New("plain"), kerr.ToStatus(kerr.New(kerr.ClusterAuthorizationFailed, "User:eve")).Err()} {
		if _, _, ok := Launcher(err); ok {
			t.Errorf("Launcher(%v) named it", err)
		}
	}
}

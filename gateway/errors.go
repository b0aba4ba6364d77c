package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"tidemark.io/services/platform/kerr"
)

// errorBody is the JSON every REST error answers with.
type errorBody struct {
	Code      int    `json:"code"`
	Name      string `json:"name"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	Retriable bool   `json:"retriable"`
}

// httpStatus picks the HTTP status that fits a Kafka-style code.
func httpStatus(c kerr.Code) int {
	switch c {
	case kerr.UnknownTopicOrPartition:
		return http.StatusNotFound
	case kerr.TopicAlreadyExists:
		return http.StatusConflict
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return http.StatusRequestEntityTooLarge
	case kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.LeaderNotAvailable,
		kerr.NotLeaderOrFollower, kerr.NotController, kerr.NetworkException, kerr.BrokerNotAvailable,
		kerr.EligibleLeadersNotAvailable, kerr.PreferredLeaderNotAvailable, kerr.KafkaStorageError:
		return http.StatusServiceUnavailable
	case kerr.RequestTimedOut:
		return http.StatusGatewayTimeout
	case kerr.UnsupportedVersion:
		return http.StatusNotImplemented
	case kerr.UnknownServerError:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// errorHandler renders gRPC errors as JSON with the Kafka-style code name and
// an HTTP status that fits; retriable unavailability carries Retry-After.
func errorHandler(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, errorBody{
			Code: int(kerr.RecordListTooLarge), Name: kerr.RecordListTooLarge.String(),
			Message: "request body is larger than " + strconv.FormatInt(mbe.Limit, 10) + " bytes"})
		return
	}
	e := kerr.FromStatus(err)
	status := httpStatus(e.Code)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, errorBody{Code: int(e.Code), Name: e.Code.String(), Message: e.Error(), Field: e.Field, Retriable: e.Code.Retriable()})
}

func writeError(w http.ResponseWriter, status int, body errorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

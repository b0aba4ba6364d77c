package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"tidemark.io/gateway/internal/resterr"
	"tidemark.io/services/platform/kerr"
)

func TestHTTPStatus(t *testing.T) {
	for code, want := range map[kerr.Code]int{
		kerr.InvalidRequiredAcks:          400,
		kerr.InvalidRequest:               400,
		kerr.UnknownTopicOrPartition:      404,
		kerr.TopicAlreadyExists:           409,
		kerr.MessageTooLarge:              413,
		kerr.RecordListTooLarge:           413,
		kerr.NotEnoughReplicas:            503,
		kerr.NotEnoughReplicasAfterAppend: 503,
		kerr.LeaderNotAvailable:           503,
		kerr.NotController:                503,
		kerr.FencedLeaderEpoch:            503, // a stale epoch: refresh and retry, not a conflict
		kerr.UnknownLeaderEpoch:           503,
		kerr.ElectionNotNeeded:            409,
		kerr.RequestTimedOut:              504,
		kerr.UnknownServerError:           500,
	} {
		if got := httpStatus(code); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}

func TestErrorHandler(t *testing.T) {
	cases := []struct {
		err    error
		status int
		name   string
		field  string
	}{
		{kerr.ToStatus(kerr.BadField(kerr.InvalidRequiredAcks, "acks", "must be 0, 1 or -1")).Err(), 400, "INVALID_REQUIRED_ACKS", "acks"},
		{kerr.ToStatus(kerr.New(kerr.NotEnoughReplicas, "isr 1 < 2")).Err(), 503, "NOT_ENOUGH_REPLICAS", ""},
		{fmt.Errorf("create topics: %w", kerr.New(kerr.TopicAlreadyExists, "exists")), 409, "TOPIC_ALREADY_EXISTS", ""},
		{status.Error(codes.Unavailable, "connection refused"), 503, "NETWORK_EXCEPTION", ""},
		{kerr.BadField(kerr.ThrottlingQuotaExceeded, "streams", "2 streams open"), 429, "THROTTLING_QUOTA_EXCEEDED", "streams"},
		{status.Error(codes.DeadlineExceeded, "late"), 504, "REQUEST_TIMED_OUT", ""},
		{context.DeadlineExceeded, 504, "REQUEST_TIMED_OUT", ""},
		{status.Errorf(codes.InvalidArgument, "%v", &inputError{field: "offset", msg: "bad"}), 400, "INVALID_REQUEST", "offset"},
		{errors.New("boom"), 500, "UNKNOWN_SERVER_ERROR", ""},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
		errorHandler(r.Context(), nil, nil, w, r, c.err)
		var body errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: %v", c.err, err)
		}
		if w.Code != c.status || body.Name != c.name || body.Field != c.field || body.Code != int(kerr.CodeOf(restError(c.err))) {
			t.Errorf("%v: %d %+v; want %d %s field %q", c.err, w.Code, body, c.status, c.name, c.field)
		}
		if (w.Code == 503 || w.Code == 429) != (w.Header().Get("Retry-After") != "") {
			t.Errorf("%v: status %d with Retry-After %q", c.err, w.Code, w.Header().Get("Retry-After"))
		}
	}
}

// TestErrorBodyShape hits every kind of REST error the gateway answers (a
// refusal with a leader hint, a controller redirect, a bad field, a
// transport failure, a plain Go error, an unknown route, a broken stream)
// and checks each body has the one shape, resterr.Body.
func TestErrorBodyShape(t *testing.T) {
	notLeader := kerr.New(kerr.NotLeaderOrFollower, "broker 1 is not the leader of orders-0")
	notLeader.Leader = &kerr.LeaderHint{ID: 2, Address: "127.0.0.1:9092", LeaderEpoch: 5}
	notController := kerr.New(kerr.NotController, "controller 1 is not active")
	notController.Controller = &kerr.NodeHint{ID: 3, Address: "127.0.0.1:9393"}
	var bodies [][]byte
	for _, err := range []error{
		kerr.ToStatus(notLeader).Err(),
		kerr.ToStatus(notController).Err(),
		kerr.ToStatus(kerr.BadField(kerr.InvalidRequiredAcks, "acks", "must be 0, 1 or -1")).Err(),
		status.Error(codes.Unavailable, "connection refused"),
		status.Errorf(codes.InvalidArgument, "%v", &inputError{field: "offset", msg: "bad"}),
		errors.New("boom"),
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
		errorHandler(r.Context(), nil, nil, w, r, err)
		bodies = append(bodies, w.Body.Bytes())
	}
	w := httptest.NewRecorder()
	routingErrorHandler(context.Background(), nil, nil, w, httptest.NewRequest(http.MethodGet, "/v1/nowhere", nil), http.StatusNotFound)
	bodies = append(bodies, w.Body.Bytes())
	st := streamErrorHandler(context.Background(), notLeader)
	line, err := newJSONMarshaler().Marshal(map[string]proto.Message{"error": proto.Message(st.Proto())})
	if err != nil {
		t.Fatal(err)
	}
	var streamed struct{ Error json.RawMessage }
	if err := json.Unmarshal(line, &streamed); err != nil {
		t.Fatal(err)
	}
	bodies = append(bodies, streamed.Error)

	for _, b := range bodies {
		if err := resterr.CheckShape(b); err != nil {
			t.Error(err)
		}
	}
	var hinted errorBody
	if err := json.Unmarshal(bodies[0], &hinted); err != nil || hinted.Leader == nil ||
		hinted.Leader.Address != "127.0.0.1:9092" || hinted.Leader.LeaderEpoch != 5 {
		t.Errorf("NOT_LEADER_OR_FOLLOWER body lost its leader hint: %s", bodies[0])
	}
	var redirected errorBody
	if err := json.Unmarshal(bodies[1], &redirected); err != nil || redirected.Controller == nil || redirected.Controller.ID != 3 {
		t.Errorf("NOT_CONTROLLER body lost its controller hint: %s", bodies[1])
	}
	if err := json.Unmarshal(bodies[len(bodies)-1], &hinted); err != nil || hinted.Leader == nil || hinted.Leader.ID != 2 {
		t.Errorf("stream error line lost its leader hint: %s", bodies[len(bodies)-1])
	}
}

// TestStreamErrorLine checks the error line of a broken stream: the same
// errorBody as any other error.
func TestStreamErrorLine(t *testing.T) {
	st := streamErrorHandler(context.Background(), kerr.New(kerr.NotLeaderOrFollower, "moved"))
	line, err := newJSONMarshaler().Marshal(map[string]proto.Message{"error": proto.Message(st.Proto())})
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Error errorBody }
	if err := json.Unmarshal(line, &got); err != nil || got.Error.Name != "NOT_LEADER_OR_FOLLOWER" || !got.Error.Retriable {
		t.Fatalf("%s: %v", line, err)
	}
}

// TestFencedLeaderEpochIsOnePolicy: a stale leader epoch means the sender's
// metadata is behind (F3). The client refreshes, the gateway reroutes, and
// a REST caller who still sees it gets 503 with Retry-After and the leader
// hint, not a 409 conflict.
func TestFencedLeaderEpochIsOnePolicy(t *testing.T) {
	c := kerr.FencedLeaderEpoch
	if !c.RefreshMetadata() || !reroutable(c) || httpStatus(c) != http.StatusServiceUnavailable {
		t.Fatalf("%s: refresh %v, reroute %v, HTTP %d; want true, true, 503", c, c.RefreshMetadata(), reroutable(c), httpStatus(c))
	}
	e := kerr.New(c, "request leader epoch 4 is older than the current leader epoch 5")
	e.Leader = &kerr.LeaderHint{ID: 2, Address: "127.0.0.1:9092", LeaderEpoch: 5}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
	errorHandler(r.Context(), nil, nil, w, r, kerr.ToStatus(e).Err())
	var body errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !body.Retriable ||
		body.Leader == nil || body.Leader.LeaderEpoch != 5 {
		t.Fatalf("FENCED_LEADER_EPOCH over REST: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body.Bytes())
	}
}

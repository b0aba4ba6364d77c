package kerr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
)

// The protobuf enum and this table must name the same codes with the same
// numbers, or clients would decode one error as another.
func TestTableMatchesProtoEnum(t *testing.T) {
	for _, c := range Codes() {
		name, ok := commonv1.ErrorCode_name[int32(c)]
		if !ok {
			t.Errorf("code %d (%s) missing from tidemark.common.v1.ErrorCode", c, c)
			continue
		}
		want := "ERROR_CODE_" + c.String()
		if c == None {
			want = "ERROR_CODE_UNSPECIFIED"
		}
		if name != want {
			t.Errorf("code %d: proto name %s, table name %s", c, name, want)
		}
	}
	for num, name := range commonv1.ErrorCode_name {
		if _, ok := table[Code(num)]; !ok {
			t.Errorf("proto enum value %s (%d) has no entry in the error table", name, num)
		}
	}
}

func TestRetriableMatchesKafka(t *testing.T) {
	retriable := []Code{NotLeaderOrFollower, LeaderNotAvailable, NotEnoughReplicas,
		NotEnoughReplicasAfterAppend, RequestTimedOut, UnknownTopicOrPartition, UnknownTopicID,
		FencedLeaderEpoch, UnknownLeaderEpoch, NotController, CorruptMessage, KafkaStorageError,
		NetworkException, ReplicaNotAvailable, PreferredLeaderNotAvailable, EligibleLeadersNotAvailable}
	for _, c := range retriable {
		if !c.Retriable() {
			t.Errorf("%s should be retriable", c)
		}
	}
	fatal := []Code{OffsetOutOfRange, MessageTooLarge, InvalidRequiredAcks, OutOfOrderSequenceNumber,
		InvalidProducerEpoch, StaleControllerEpoch, StaleBrokerEpoch, TopicAlreadyExists,
		InvalidReplicationFactor, InvalidTopicException, ElectionNotNeeded, IneligibleReplica,
		BrokerNotAvailable, UnknownServerError, UnknownProducerID, DuplicateSequenceNumber,
		InvalidUpdateVersion, StaleBrokerEpoch, NewLeaderElected, PolicyViolation}
	for _, c := range fatal {
		if c.Retriable() {
			t.Errorf("%s should not be retriable", c)
		}
	}
}

// Kafka's InvalidMetadataException family (plus NOT_CONTROLLER, after which
// Kafka's admin client refreshes too): the sender's routing is stale.
func TestRefreshMetadataMatchesKafka(t *testing.T) {
	refresh := []Code{NotLeaderOrFollower, UnknownTopicOrPartition, UnknownTopicID, LeaderNotAvailable,
		FencedLeaderEpoch, NotController, KafkaStorageError, NetworkException,
		ReplicaNotAvailable, PreferredLeaderNotAvailable, EligibleLeadersNotAvailable,
		UnknownLeaderEpoch} // tidemark's departure from Kafka: see the table
	for _, c := range refresh {
		if !c.RefreshMetadata() {
			t.Errorf("%s should refresh metadata before a retry", c)
		}
	}
	// Retriable, but the sender's routing is right: retry as it is.
	for _, c := range []Code{NotEnoughReplicas, NotEnoughReplicasAfterAppend, RequestTimedOut, CorruptMessage} {
		if c.RefreshMetadata() {
			t.Errorf("%s should be retried without a metadata refresh", c)
		}
	}
}

// Every code in the table carries every column, the columns agree with
// each other, and the code survives the trip through a gRPC status.
func TestEveryCodeHasAConsistentPolicy(t *testing.T) {
	for _, c := range Codes() {
		in := Lookup(c)
		if in.Name == "" || strings.HasPrefix(in.Name, "UNKNOWN_CODE_") {
			t.Errorf("code %d has no name", c)
		}
		if in.HTTP < 200 || in.HTTP > 599 {
			t.Errorf("%s: HTTP status %d", c, in.HTTP)
		}
		if in.Reroute && !in.Retriable {
			t.Errorf("%s: rerouted by the gateway but not retriable", c)
		}
		if in.RefreshMetadata && !in.Retriable {
			t.Errorf("%s: refreshes metadata but not retriable", c)
		}
		if c == None {
			if in.GRPC != codes.OK || in.HTTP != 200 {
				t.Errorf("NONE: grpc %s http %d", in.GRPC, in.HTTP)
			}
			continue
		}
		if in.GRPC == codes.OK {
			t.Errorf("%s: an error must not travel as gRPC OK", c)
		}
		if in.HTTP < 400 {
			t.Errorf("%s: an error must not answer HTTP %d", c, in.HTTP)
		}
		// A retriable answer tells a REST caller to come back (5xx,
		// Retry-After on 503), except a topic (or topic id) not (yet) known: 404, and a
		// throttled caller: 429 with Retry-After.
		if in.Retriable && in.HTTP < 500 && c != UnknownTopicOrPartition && c != UnknownTopicID && c != ThrottlingQuotaExceeded {
			t.Errorf("%s: retriable but HTTP %d", c, in.HTTP)
		}
		if in.Reroute && in.HTTP != 503 {
			t.Errorf("%s: rerouted but HTTP %d, want 503", c, in.HTTP)
		}
		st := ToStatus(New(c, "test %d", c))
		if st.Code() != in.GRPC {
			t.Errorf("%s: status code %s, table says %s", c, st.Code(), in.GRPC)
		}
		back := FromStatus(st.Err())
		if back.Code != c || back.Message != fmt.Sprintf("test %d", c) {
			t.Errorf("%s: round trip gave %s %q", c, back.Code, back.Message)
		}
		var d *commonv1.ErrorDetail
		for _, x := range st.Details() {
			d, _ = x.(*commonv1.ErrorDetail)
		}
		if d == nil || d.GetName() != in.Name || d.GetRetriable() != in.Retriable {
			t.Errorf("%s: detail %v does not carry the table's name and retriability", c, d)
		}
	}
	if got := Lookup(Code(9999)); got.HTTP != 500 || got.GRPC != codes.Internal || got.Retriable {
		t.Errorf("unknown code: %+v", got)
	}
}

func TestStatusRoundTrip(t *testing.T) {
	in := &Error{Code: NotLeaderOrFollower, Message: "broker 2 is not the leader of orders-0",
		Leader: &LeaderHint{ID: 3, Address: "127.0.0.1:9094", LeaderEpoch: 7}}
	st := ToStatus(fmt.Errorf("produce: %w", in))
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("grpc code = %s, want FailedPrecondition", st.Code())
	}
	out := FromStatus(st.Err())
	if out.Code != NotLeaderOrFollower || out.Leader == nil || out.Leader.ID != 3 ||
		out.Leader.Address != "127.0.0.1:9094" || out.Leader.LeaderEpoch != 7 {
		t.Fatalf("round trip lost data: %+v leader=%+v", out, out.Leader)
	}
	if !strings.Contains(st.Message(), "NOT_LEADER_OR_FOLLOWER") {
		t.Errorf("status message %q does not name the code", st.Message())
	}
}

func TestBadFieldNamesTheField(t *testing.T) {
	e := BadField(InvalidRequiredAcks, "acks", "must be 0, 1 or -1, got %d", 2)
	st := ToStatus(e)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %s", st.Code())
	}
	d := FromStatus(st.Err())
	if d.Field != "acks" || !strings.Contains(d.Message, "got 2") {
		t.Fatalf("detail %+v", d)
	}
}

func TestForeignErrors(t *testing.T) {
	if c := FromStatus(ToStatus(errors.New("boom")).Err()).Code; c != UnknownServerError {
		t.Errorf("plain error -> %s", c)
	}
	if c := FromStatus(ToStatus(context.DeadlineExceeded).Err()).Code; c != RequestTimedOut {
		t.Errorf("deadline -> %s", c)
	}
	if c := FromStatus(status.Error(codes.Unavailable, "conn refused")).Code; c != NetworkException {
		t.Errorf("unavailable -> %s", c)
	}
	if !errors.Is(fmt.Errorf("x: %w", New(NotEnoughReplicas, "isr 1 < 2")), Sentinel(NotEnoughReplicas)) {
		t.Error("errors.Is with a sentinel should match by code")
	}
	if CodeOf(nil) != None {
		t.Error("nil should be NONE")
	}
}

// The group hints (the coordinator on NOT_COORDINATOR, the assigned member
// id on MEMBER_ID_REQUIRED) survive the trip through a gRPC status.
func TestGroupHintsRoundTrip(t *testing.T) {
	nc := &Error{Code: NotCoordinator, Message: "broker 1 does not coordinate g", Coordinator: &NodeHint{ID: 2, Address: "127.0.0.1:9093"}}
	out := FromStatus(ToStatus(nc).Err())
	if out.Code != NotCoordinator || out.Coordinator == nil || out.Coordinator.ID != 2 || out.Coordinator.Address != "127.0.0.1:9093" {
		t.Fatalf("NOT_COORDINATOR round trip lost the coordinator: %+v", out)
	}
	mr := &Error{Code: MemberIDRequired, Message: "join again", MemberID: "c-1-abc"}
	if out := FromStatus(ToStatus(mr).Err()); out.Code != MemberIDRequired || out.MemberID != "c-1-abc" {
		t.Fatalf("MEMBER_ID_REQUIRED round trip lost the member id: %+v", out)
	}
}

// What a call got done before it failed (a DeleteRecords' low watermark)
// travels with the error as a second status detail and comes back; an
// error without one comes back without one.
func TestPartialAnswerRoundTrip(t *testing.T) {
	e := &Error{Code: RequestTimedOut, Message: "low watermark 4 has not reached 8", Partial: &commonv1.Node{Id: 4}}
	out := FromStatus(ToStatus(e).Err())
	if n, ok := out.Partial.(*commonv1.Node); out.Code != RequestTimedOut || !ok || n.GetId() != 4 {
		t.Fatalf("REQUEST_TIMED_OUT round trip: %+v, want the partial answer back", out)
	}
	if out := FromStatus(ToStatus(New(RequestTimedOut, "no partial")).Err()); out.Partial != nil {
		t.Fatalf("an error without a partial answer came back with %v", out.Partial)
	}
}

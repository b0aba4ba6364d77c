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
		NotEnoughReplicasAfterAppend, RequestTimedOut, UnknownTopicOrPartition,
		FencedLeaderEpoch, UnknownLeaderEpoch, NotController, CorruptMessage, KafkaStorageError}
	for _, c := range retriable {
		if !c.Retriable() {
			t.Errorf("%s should be retriable", c)
		}
	}
	fatal := []Code{OffsetOutOfRange, MessageTooLarge, InvalidRequiredAcks, OutOfOrderSequenceNumber,
		InvalidProducerEpoch, StaleControllerEpoch, StaleBrokerEpoch, TopicAlreadyExists,
		InvalidReplicationFactor, InvalidTopicException, ElectionNotNeeded, IneligibleReplica}
	for _, c := range fatal {
		if c.Retriable() {
			t.Errorf("%s should not be retriable", c)
		}
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

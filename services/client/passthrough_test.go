package client_test

import (
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
)

// The pass-through calls route by the client's metadata cache: Leader names
// the current leader, a NOT_LEADER_OR_FOLLOWER hint reported through
// NoteError moves the route without a metadata round trip, and an answer
// without a hint makes the next Leader look the partition up again.
func TestPassThroughRoutingFollowsLeaderMoves(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 3})
	fc.CreateTopic("t", 1, 1, 2, 3)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	list := func(bc brokerv1.BrokerServiceClient) error {
		_, err := bc.ListOffsets(ctx, &brokerv1.ListOffsetsRequest{Topic: "t", Spec: brokerv1.OffsetSpec_OFFSET_SPEC_LATEST})
		return err
	}
	bc, err := c.Leader(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := list(bc); err != nil {
		t.Fatalf("call on the leader: %v", err)
	}
	if got := fc.NodeCalls(1, "ListOffsets"); got != 1 {
		t.Fatalf("broker 1 (the leader) saw %d calls", got)
	}

	// Moved with a hint: no metadata request is needed.
	fc.MoveLeader("t", 0, 2)
	metadataCalls := fc.Calls("Metadata")
	err = list(bc)
	if kerr.FromStatus(err).Code != kerr.NotLeaderOrFollower {
		t.Fatalf("call on the old leader = %v", err)
	}
	c.NoteError("t", 0, err)
	if bc, err = c.Leader(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	if err := list(bc); err != nil || fc.NodeCalls(2, "ListOffsets") != 1 {
		t.Fatalf("call after the hint: %v, broker 2 saw %d", err, fc.NodeCalls(2, "ListOffsets"))
	}
	if fc.Calls("Metadata") != metadataCalls {
		t.Fatal("the leader hint cost a metadata request")
	}

	// Moved without a hint: the next Leader asks the metadata again.
	fc.SetLeaderHints(false)
	fc.MoveLeader("t", 0, 3)
	err = list(bc)
	c.NoteError("t", 0, err)
	if bc, err = c.Leader(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	if err := list(bc); err != nil || fc.NodeCalls(3, "ListOffsets") != 1 {
		t.Fatalf("call after the refresh: %v, broker 3 saw %d", err, fc.NodeCalls(3, "ListOffsets"))
	}
	if fc.Calls("Metadata") == metadataCalls {
		t.Fatal("no metadata request after an answer without a hint")
	}

	// Unknown topics and partitions are final answers naming the field.
	for _, tc := range []struct {
		topic string
		part  int32
		field string
	}{{"nope", 0, "topic"}, {"t", 7, "partition"}} {
		_, err := c.Leader(ctx, tc.topic, tc.part)
		if e := kerr.As(err); e.Code != kerr.UnknownTopicOrPartition || e.Field != tc.field {
			t.Errorf("Leader(%s-%d) = %v; want UNKNOWN_TOPIC_OR_PARTITION naming %s", tc.topic, tc.part, err, tc.field)
		}
	}
}

package clustertest

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/platform/kerr"
)

// Strings longer than Kafka's int16-length strings, and a follower fetch's
// numbers out of range, are refused at once naming the field. Before: a
// long rack_id was kept with the fetch; DescribeGroups and DeleteGroups
// repeated a long group id in their answer (a 5 MB one passed the
// client's 4 MB receive limit); a negative or hour-long ReplicaFetch wait
// was taken as given; and an OffsetCommit's unnamed topic was named
// "topics.name" whatever its index.
func TestLongStringsAndFollowerFetchNumbersAreRefusedNamingTheField(t *testing.T) {
	c := Start(t, Options{Brokers: 2, Controllers: 1, BrokerSettings: GroupSettings, AdjustController: OffsetsPartitions(1)})
	c.CreateTopic("t", 1, 2, nil)
	leaderID := c.Leader("t", 0)
	leader := c.BrokerClient(leaderID)
	if _, err := Call(Groups{c}, "app", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
		return api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "t", Partitions: []*groupv1.OffsetCommitPartition{{CommittedOffset: 0}}}}})
	}); err != nil {
		t.Fatal(err)
	}
	_, coordinator := c.CoordinatorOf("app")
	long := strings.Repeat("r", math.MaxInt16+1)
	replicaFetch := func(req *replicationv1.ReplicaFetchRequest) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			s, err := replicationv1.NewReplicationServiceClient(c.Conn(c.brokerAddr(leaderID))).ReplicaFetch(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(req); err != nil && err != io.EOF {
				return err
			}
			_, err = s.Recv()
			return err
		}
	}
	follower := int32(1)
	if leaderID == 1 {
		follower = 2
	}
	fetchOf := func(mod func(*replicationv1.ReplicaFetchRequest)) func(ctx context.Context) error {
		req := &replicationv1.ReplicaFetchRequest{ReplicaId: follower, MaxWaitMs: 10, MinBytes: 1, MaxBytes: 1 << 20,
			Partitions: []*replicationv1.ReplicaFetchPartition{{Topic: "t", Partition: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}}
		mod(req)
		return replicaFetch(req)
	}
	cases := []badInputCall{
		{"a rack id longer than a Kafka string (Fetch)", func(ctx context.Context) error {
			_, err := leader.Fetch(ctx, &brokerv1.FetchRequest{Topic: "t", RackId: long})
			return err
		}, kerr.InvalidRequest, "rack_id"},
		{"a rack id longer than a Kafka string (Follow)", func(ctx context.Context) error {
			s, err := leader.Follow(ctx, &brokerv1.FollowRequest{Topic: "t", RackId: long})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, kerr.InvalidRequest, "rack_id"},
		{"a group id longer than a record holds (DescribeGroups)", func(ctx context.Context) error {
			_, err := coordinator.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"app", long}})
			return err
		}, kerr.InvalidRequest, "group_ids[1]"},
		{"a group id longer than a record holds (DeleteGroups)", func(ctx context.Context) error {
			_, err := coordinator.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{long}})
			return err
		}, kerr.InvalidRequest, "group_ids[0]"},
		{"an ACL filter's principal longer than a Kafka string", func(ctx context.Context) error {
			_, err := c.Admin().DescribeAcls(ctx, &adminv1.DescribeAclsRequest{Filter: &adminv1.AclBindingFilter{Principal: &long}})
			return err
		}, kerr.InvalidRequest, "principal"},
		{"an unnamed topic in a commit", func(ctx context.Context) error {
			_, err := coordinator.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app", GenerationId: -1,
				Topics: []*groupv1.OffsetCommitTopic{{Name: "t", Partitions: []*groupv1.OffsetCommitPartition{{CommittedOffset: 0}}}, {}}})
			return err
		}, kerr.InvalidTopicException, "topics[1].name"},
		{"a negative follower max wait", fetchOf(func(r *replicationv1.ReplicaFetchRequest) { r.MaxWaitMs = -1 }), kerr.InvalidRequest, "max_wait_ms"},
		{"a follower max wait beyond a minute", fetchOf(func(r *replicationv1.ReplicaFetchRequest) { r.MaxWaitMs = 3_600_000 }), kerr.InvalidRequest, "max_wait_ms"},
		{"a negative follower min bytes", fetchOf(func(r *replicationv1.ReplicaFetchRequest) { r.MinBytes = -1 }), kerr.InvalidRequest, "min_bytes"},
		{"a negative follower max bytes", fetchOf(func(r *replicationv1.ReplicaFetchRequest) { r.MaxBytes = -1 }), kerr.InvalidRequest, "max_bytes"},
		{"a negative follower partition max bytes", fetchOf(func(r *replicationv1.ReplicaFetchRequest) { r.Partitions[0].PartitionMaxBytes = -1 }),
			kerr.InvalidRequest, "partitions[0].partition_max_bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectRefusal(t, tc)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := leader.Fetch(ctx, &brokerv1.FetchRequest{Topic: "t", RackId: "r1"}); err != nil {
				t.Fatalf("a good fetch after it: %v", err)
			}
		})
	}

	// ACL creations are answered one by one, as Kafka's: the long
	// resource name or principal is INVALID_REQUEST naming it, and the
	// good creation beside them is made.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	binding := func(name, principal string) *adminv1.AclBinding {
		return &adminv1.AclBinding{ResourceType: "TOPIC", ResourceName: name, PatternType: "LITERAL",
			Principal: principal, Host: "*", Operation: "READ", PermissionType: "ALLOW"}
	}
	created, err := c.Admin().CreateAcls(ctx, &adminv1.CreateAclsRequest{Creations: []*adminv1.AclBinding{
		binding(long, "User:alice"), binding("t", "User:"+long), binding("t", "User:alice")}})
	if err != nil {
		t.Fatalf("CreateAcls: %v", err)
	}
	for i, field := range []string{"resource_name", "principal"} {
		r := created.GetResults()[i]
		if kerr.Code(r.GetErrorCode()) != kerr.InvalidRequest || !strings.HasPrefix(r.GetErrorMessage(), field+":") || len(r.GetErrorMessage()) > 1024 {
			t.Errorf("creation %d with a long %s: %v %.200q, want INVALID_REQUEST naming it", i, field, kerr.Code(r.GetErrorCode()), r.GetErrorMessage())
		}
	}
	if r := created.GetResults()[2]; r.GetErrorCode() != 0 {
		t.Fatalf("the good creation beside them: %v", r)
	}
	listed, err := c.Admin().DescribeAcls(ctx, &adminv1.DescribeAclsRequest{})
	if err != nil || len(listed.GetBindings()) != 1 || listed.GetBindings()[0].GetPrincipal() != "User:alice" {
		t.Fatalf("bindings after the creations: %d, %v; want only the good one", len(listed.GetBindings()), err)
	}
}

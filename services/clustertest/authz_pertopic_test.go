package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/authz/authztest"
	"tidemark.io/services/platform/kerr"
)

// A DescribeTopics or OffsetFetch naming a topic the caller may Describe
// and one it may not answers each, over gRPC with mutual TLS, as the
// Kafka listener does: the allowed one described or fetched, the other
// TOPIC_AUTHORIZATION_FAILED. Before, the one refused topic failed the
// whole call and hid the other's answer.
func TestAMixedCallAnswersEachTopicOverMutualTLS(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:alice Describe Topic:orders-*\nallow User:alice Describe Group:app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Start(t, Options{
		Secure:           true,
		BrokerSettings:   GroupSettings,
		Adjust:           func(cfg *broker.Config) { cfg.Authz.ACLFile = acl },
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl; cfg.OffsetsTopicNumPartitions = 3 },
	})
	certs := &authztest.PKI{Dir: c.PKIDir}
	c.CreateTopic("orders-1", 1, 3, nil)
	c.CreateTopic("payroll", 1, 3, nil)
	g := Groups{c}
	resp, err := Call(g, "app", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
		return api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app", GenerationId: -1, Topics: []*groupv1.OffsetCommitTopic{
			{Name: "orders-1", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 5, CommittedLeaderEpoch: -1}}},
			{Name: "payroll", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 7, CommittedLeaderEpoch: -1}}},
		}})
	})
	if err == nil {
		err = CommitRefused(resp)
	}
	if err != nil {
		t.Fatalf("commit as the cluster's admin: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refused := func(code int32, what string) {
		t.Helper()
		if kerr.Code(code) != kerr.TopicAuthorizationFailed {
			t.Errorf("%s answered %s, want TOPIC_AUTHORIZATION_FAILED", what, kerr.Code(code))
		}
	}

	t.Run("DescribeTopics", func(t *testing.T) {
		_, addr := c.activeAddr(t)
		resp, err := adminv1.NewAdminServiceClient(certs.Dial(t, addr, "alice")).DescribeTopics(ctx,
			&adminv1.DescribeTopicsRequest{Topics: []string{"orders-1", "payroll"}})
		if err != nil {
			t.Fatalf("DescribeTopics: %v, want an answer per topic", err)
		}
		if ts := resp.GetTopics(); len(ts) != 2 || ts[0].GetName() != "orders-1" || ts[1].GetName() != "payroll" {
			t.Fatalf("described %v, want orders-1 and payroll", ts)
		}
		orders, payroll := resp.GetTopics()[0], resp.GetTopics()[1]
		if orders.GetErrorCode() != 0 || len(orders.GetPartitions()) != 1 || orders.GetTopicId() == "" {
			t.Errorf("orders-1 described as %v, want its partition", orders)
		}
		refused(int32(payroll.GetErrorCode()), "payroll")
		if payroll.GetErrorMessage() != "User:alice is not allowed Describe on Topic:payroll" || len(payroll.GetPartitions()) != 0 || payroll.GetTopicId() != "" {
			t.Errorf("payroll refused as %v, want its refusal and nothing of it", payroll)
		}
	})

	t.Run("OffsetFetch", func(t *testing.T) {
		alice := groupv1.NewGroupServiceClient(certs.Dial(t, c.brokerAddr(g.Coordinator("app")), "alice"))
		resp, err := alice.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app", Topics: []*groupv1.OffsetFetchTopic{
			{Name: "orders-1", Partitions: []int32{0}}, {Name: "payroll", Partitions: []int32{0}}}})
		if err != nil {
			t.Fatalf("OffsetFetch: %v, want an answer per topic", err)
		}
		ts := resp.GetTopics()
		if len(ts) != 2 || ts[0].GetName() != "orders-1" || ts[1].GetName() != "payroll" || len(ts[0].GetPartitions()) != 1 || len(ts[1].GetPartitions()) != 1 {
			t.Fatalf("fetched %v, want a partition of orders-1 and of payroll", ts)
		}
		if p := ts[0].GetPartitions()[0]; p.GetErrorCode() != 0 || p.GetCommittedOffset() != 5 || ts[0].GetErrorCode() != 0 {
			t.Errorf("orders-1 fetched as %v, want offset 5", ts[0])
		}
		refused(int32(ts[1].GetErrorCode()), "payroll")
		refused(int32(ts[1].GetPartitions()[0].GetErrorCode()), "payroll-0")
		if off := ts[1].GetPartitions()[0].GetCommittedOffset(); off != -1 {
			t.Errorf("payroll-0's offset shown as %d to a caller that may not Describe it", off)
		}
		// All of a refused topic's partitions: none listed, the topic's
		// code says why.
		resp, err = alice.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app", Topics: []*groupv1.OffsetFetchTopic{{Name: "payroll"}}})
		if err != nil {
			t.Fatal(err)
		}
		if ts := resp.GetTopics(); len(ts) != 1 || len(ts[0].GetPartitions()) != 0 {
			t.Fatalf("fetched %v, want payroll refused with no partitions", ts)
		}
		refused(int32(resp.GetTopics()[0].GetErrorCode()), "payroll (all partitions)")
		// All topics: only those she may Describe.
		resp, err = alice.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app"})
		if err != nil {
			t.Fatal(err)
		}
		if ts := resp.GetTopics(); len(ts) != 1 || ts[0].GetName() != "orders-1" {
			t.Fatalf("fetched all as %v, want only orders-1", ts)
		}
	})
}

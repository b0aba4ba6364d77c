package clustertest

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// badInputCall is one call with a bad field and the refusal it must get.
type badInputCall struct {
	name  string
	call  func(ctx context.Context) error
	code  kerr.Code
	field string
}

// Bad input over real sockets gets InvalidArgument (a corrupt batch
// DataLoss), the Kafka-style code in the status detail, and a message and
// detail naming the field; it never hangs, and the servers answer good
// calls after it. No case here named its field before: a corrupt batch was
// refused naming none, and the others were not refused at all (producer
// epoch 65536 was taken for epoch 0, a negative DeleteRecords wait for the
// default, an unknown coordinator type for a group, and strings over 32767
// bytes were stored in __consumer_offsets records whose int16 length they
// wrapped: no coordinator could read those records back).
func TestBadInputIsRefusedNamingTheField(t *testing.T) {
	settings := maps.Clone(GroupSettings)
	settings["offset.metadata.max.bytes"] = "65536" // above what a record's string holds
	c := Start(t, Options{Brokers: 2, Controllers: 1, BrokerSettings: settings, AdjustController: OffsetsPartitions(1)})
	c.CreateTopic("t", 1, 2, nil)
	ctx := context.Background()
	leader := c.BrokerClient(c.Leader("t", 0))
	// A good commit first: the coordinator has loaded the group's shard.
	if _, err := Call(Groups{c}, "app", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
		return api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "t", Partitions: []*groupv1.OffsetCommitPartition{{CommittedOffset: 0}}}}})
	}); err != nil {
		t.Fatal(err)
	}
	_, coordinator := c.CoordinatorOf("app")
	admin := c.Admin()
	pid, err := leader.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{})
	if err != nil {
		t.Fatal(err)
	}
	records := &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record("v")}}
	long := strings.Repeat("g", math.MaxInt16+1)
	join := func(mod func(*groupv1.JoinGroupRequest)) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			req := &groupv1.JoinGroupRequest{GroupId: "app", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 1000,
				ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}, {Name: "roundrobin"}}}
			mod(req)
			_, err := coordinator.JoinGroup(ctx, req)
			return err
		}
	}
	// A good batch, and the same batch spoilt after its CRC was computed
	// (or with the CRC computed again over the spoilt bytes).
	batch := func(spoil func([]byte), recrc bool) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var bld recordbatch.Builder
			bld.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("a")})
			bld.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("b")})
			b := append([]byte(nil), bld.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)...)
			spoil(b)
			if recrc {
				binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
			}
			_, err := leader.Produce(ctx, &brokerv1.ProduceRequest{Topic: "t", Acks: -1,
				Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: b}})
			return err
		}
	}
	cases := []badInputCall{
		// Offsets within a v2 batch header: length 8, magic 16, CRC 17
		// (over the bytes from 21), attributes 21, last offset delta 23,
		// record count 57; records from 61.
		{"a batch whose CRC does not match", batch(func(b []byte) { b[len(b)-1] ^= 0xff }, false), kerr.CorruptMessage, "record_batch"},
		{"a batch length beyond its bytes", batch(func(b []byte) { binary.BigEndian.PutUint32(b[8:], 1<<20) }, false), kerr.CorruptMessage, "record_batch"},
		{"a batch of magic 1", batch(func(b []byte) { b[16] = 1 }, true), kerr.CorruptMessage, "record_batch"},
		{"a batch of an unknown codec", batch(func(b []byte) { b[22] |= 7 }, true), kerr.InvalidRecord, "record_batch"},
		{"a gzip batch of plain records", batch(func(b []byte) { b[22] |= 1 }, true), kerr.CorruptMessage, "record_batch"},
		{"a batch counting more records than it holds", batch(func(b []byte) { binary.BigEndian.PutUint32(b[57:], 3) }, true), kerr.InvalidRecord, "record_batch"},
		{"a batch whose record length is corrupt", batch(func(b []byte) { b[61] = 0x7f }, true), kerr.CorruptMessage, "record_batch"},
		{"a producer epoch beyond int16", func(ctx context.Context) error {
			_, err := leader.Produce(ctx, &brokerv1.ProduceRequest{Topic: "t", Acks: -1, Payload: records,
				ProducerId: pid.GetProducerId(), ProducerEpoch: 1 << 16})
			return err
		}, kerr.InvalidRequest, "producer_epoch"},
		{"a producer epoch below int16", func(ctx context.Context) error {
			_, err := leader.Produce(ctx, &brokerv1.ProduceRequest{Topic: "t", Acks: -1, Payload: records,
				ProducerId: pid.GetProducerId(), ProducerEpoch: math.MinInt32})
			return err
		}, kerr.InvalidRequest, "producer_epoch"},
		{"a negative DeleteRecords timeout", func(ctx context.Context) error {
			_, err := leader.DeleteRecords(ctx, &brokerv1.DeleteRecordsRequest{Topic: "t", Offset: 0, TimeoutMs: -1})
			return err
		}, kerr.InvalidRequest, "timeout_ms"},
		{"an unknown coordinator type", func(ctx context.Context) error {
			_, err := coordinator.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: "app", KeyType: 7})
			return err
		}, kerr.InvalidRequest, "key_type"},
		{"a coordinator key too long to store", func(ctx context.Context) error {
			_, err := coordinator.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: long})
			return err
		}, kerr.InvalidGroupID, "key"},
		{"a group id too long to store (join)", join(func(r *groupv1.JoinGroupRequest) { r.GroupId = long }), kerr.InvalidGroupID, "group_id"},
		{"a client id too long to store", join(func(r *groupv1.JoinGroupRequest) { r.ClientId = long }), kerr.InvalidRequest, "client_id"},
		{"a member id too long to store", join(func(r *groupv1.JoinGroupRequest) { r.MemberId = long }), kerr.InvalidRequest, "member_id"},
		{"a group instance id too long to store", join(func(r *groupv1.JoinGroupRequest) { r.GroupInstanceId = long }), kerr.InvalidRequest, "group_instance_id"},
		{"a protocol type too long to store", join(func(r *groupv1.JoinGroupRequest) { r.ProtocolType = long }), kerr.InvalidRequest, "protocol_type"},
		{"a protocol name too long to store", join(func(r *groupv1.JoinGroupRequest) { r.Protocols[1].Name = long }), kerr.InvalidRequest, "protocols[1].name"},
		{"a group id too long to store (commit)", func(ctx context.Context) error {
			_, err := coordinator.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: long, GenerationId: -1,
				Topics: []*groupv1.OffsetCommitTopic{{Name: "t", Partitions: []*groupv1.OffsetCommitPartition{{CommittedOffset: 0}}}}})
			return err
		}, kerr.InvalidGroupID, "group_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectRefusal(t, tc)
			// Each server still answers a good call.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := leader.Produce(ctx, &brokerv1.ProduceRequest{Topic: "t", Acks: -1, Payload: records}); err != nil {
				t.Fatalf("a good produce after it: %v", err)
			}
			if _, err := coordinator.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: "app"}); err != nil {
				t.Fatalf("a good FindCoordinator after it: %v", err)
			}
			if _, err := admin.DescribeCluster(ctx, &adminv1.DescribeClusterRequest{}); err != nil {
				t.Fatalf("a good DescribeCluster after it: %v", err)
			}
		})
	}
	// An offset's metadata is a string of the same records: whatever
	// offset.metadata.max.bytes allows, a longer one is refused per
	// partition, as one over the setting is.
	resp, err := coordinator.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "meta", GenerationId: -1,
		Topics: []*groupv1.OffsetCommitTopic{{Name: "t", Partitions: []*groupv1.OffsetCommitPartition{{CommittedOffset: 1, Metadata: long}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if code := kerr.Code(resp.GetTopics()[0].GetPartitions()[0].GetErrorCode()); code != kerr.OffsetMetadataTooLarge {
		t.Fatalf("a commit with %d bytes of metadata: %v, want %s", len(long), code, kerr.OffsetMetadataTooLarge)
	}
	// None of the refused produces reached the log: only the good ones.
	if got := c.Values(c.Leader("t", 0), "t", 0); len(got) != len(cases) {
		t.Fatalf("the log holds %d records, want the %d good ones: %q", len(got), len(cases), got)
	}
}

// expectRefusal makes tc's call with a deadline and checks its refusal.
func expectRefusal(t *testing.T, tc badInputCall) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := tc.call(ctx)
	if err == nil {
		t.Fatalf("accepted; want %s naming %s", tc.code, tc.field)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("still unanswered at its deadline: %v", err)
	}
	// The class the error table gives the code: InvalidArgument for bad
	// fields, DataLoss for a corrupt batch.
	st, _ := status.FromError(err)
	if want := kerr.Lookup(tc.code).GRPC; st.Code() != want {
		t.Fatalf("status %v (%s), want %v", st.Code(), st.Message(), want)
	}
	ke := kerr.FromStatus(err)
	if ke.Code != tc.code || ke.Field != tc.field {
		t.Fatalf("detail %s field %q, want %s field %q: %s", ke.Code, ke.Field, tc.code, tc.field, st.Message())
	}
	if !strings.Contains(st.Message(), tc.field) || len(st.Message()) > 1024 {
		t.Fatalf("message %.200q does not name %s in a few words", st.Message(), tc.field)
	}
}

// A request that leaves out DescribeAcls' filter (grpcurl's {}) matches
// every binding, as an empty filter does; it used to panic in the
// controller and come back INTERNAL.
func TestDescribeAclsWithoutAFilterListsEveryBinding(t *testing.T) {
	c := Start(t, Options{Brokers: 1, Controllers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := &adminv1.AclBinding{ResourceType: "TOPIC", ResourceName: "orders", PatternType: "LITERAL",
		Principal: "User:alice", Host: "*", Operation: "READ", PermissionType: "ALLOW"}
	created, err := c.Admin().CreateAcls(ctx, &adminv1.CreateAclsRequest{Creations: []*adminv1.AclBinding{b}})
	if err != nil || created.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("CreateAcls: %v %v", created, err)
	}
	c.WaitFor(10*time.Second, "the binding listed without a filter", func() bool {
		resp, err := c.Admin().DescribeAcls(ctx, &adminv1.DescribeAclsRequest{})
		if err != nil {
			t.Fatalf("DescribeAcls without a filter: %v", err)
		}
		return len(resp.GetBindings()) == 1 && resp.GetBindings()[0].GetResourceName() == "orders"
	})
}

// A commit asking for a retention so long that commit time plus retention
// passes int64 keeps its offset: the sum used to wrap to the past, and the
// next retention check dropped the offset at once. A commit with a 1 ms
// retention, made after it, shows that a check ran.
func TestCommitWithTheLongestRetentionIsKept(t *testing.T) {
	settings := maps.Clone(GroupSettings)
	settings["offsets.retention.check.interval.ms"] = "100"
	c := Start(t, Options{Brokers: 1, Controllers: 1, BrokerSettings: settings, AdjustController: OffsetsPartitions(1)})
	c.CreateTopic("t", 1, 1, nil)
	g := Groups{c}
	commit := func(group string, retention int64) {
		resp, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
			return api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: -1, RetentionTimeMs: &retention,
				Topics: []*groupv1.OffsetCommitTopic{{Name: "t", Partitions: []*groupv1.OffsetCommitPartition{{CommittedOffset: 7, CommittedLeaderEpoch: -1}}}}})
		})
		if err != nil || resp.GetTopics()[0].GetPartitions()[0].GetErrorCode() != 0 {
			t.Fatalf("commit for %s: %v %v", group, resp, err)
		}
	}
	committed := func(group string) int64 {
		resp, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetFetchResponse, error) {
			return api.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: group,
				Topics: []*groupv1.OffsetFetchTopic{{Name: "t", Partitions: []int32{0}}}})
		})
		if err != nil {
			t.Fatalf("OffsetFetch for %s: %v", group, err)
		}
		return resp.GetTopics()[0].GetPartitions()[0].GetCommittedOffset()
	}
	commit("kept", math.MaxInt64)
	commit("brief", 1)
	c.WaitFor(20*time.Second, "the 1 ms retention offset expired", func() bool { return committed("brief") == -1 })
	if got := committed("kept"); got != 7 {
		t.Fatalf("the offset committed with retention %d reads %d after a retention check, want 7", int64(math.MaxInt64), got)
	}
}

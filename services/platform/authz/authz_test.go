package authz_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/authz/authztest"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// recorder is every stub service: it notes which handlers ran and with
// what, so a test can see that a refused call changed nothing.
type recorder struct {
	mu    sync.Mutex
	calls []string

	controlv1.UnimplementedBrokerControlServiceServer
	controlv1.UnimplementedControllerServiceServer
	replicationv1.UnimplementedReplicationServiceServer
	adminv1.UnimplementedAdminServiceServer
	brokerv1.UnimplementedBrokerServiceServer
	faultv1.UnimplementedFaultInjectionServiceServer
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *recorder) LeaderAndIsr(ctx context.Context, req *controlv1.LeaderAndIsrRequest) (*controlv1.LeaderAndIsrResponse, error) {
	r.note("LeaderAndIsr by " + identity.FromContext(ctx).Name)
	return &controlv1.LeaderAndIsrResponse{}, nil
}

func (r *recorder) ReplicaFetch(s replicationv1.ReplicationService_ReplicaFetchServer) error {
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		r.note("ReplicaFetch as " + itoa(req.GetReplicaId()))
		if err := s.Send(&replicationv1.ReplicaFetchResponse{}); err != nil {
			return err
		}
	}
}

// BrokerSession swallows a failed receive, as a careless handler might:
// the refusal must still reach the caller.
func (r *recorder) BrokerSession(s controlv1.ControllerService_BrokerSessionServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		r.note("BrokerSession as " + itoa(req.GetBrokerId()))
		if err := s.Send(&controlv1.BrokerSessionResponse{}); err != nil {
			return err
		}
	}
}

func (r *recorder) Produce(ctx context.Context, req *brokerv1.ProduceRequest) (*brokerv1.ProduceResponse, error) {
	r.note("Produce to " + req.GetTopic())
	return &brokerv1.ProduceResponse{}, nil
}

func (r *recorder) DescribeTopics(context.Context, *adminv1.DescribeTopicsRequest) (*adminv1.DescribeTopicsResponse, error) {
	return &adminv1.DescribeTopicsResponse{Topics: []*adminv1.TopicDescription{{Name: "orders-1"}, {Name: "payroll"}, {Name: "orders-2"}}}, nil
}

// Metadata knows orders-1, payroll and orders-2; a named topic it does not
// know is UNKNOWN_TOPIC_OR_PARTITION, as the broker answers.
func (r *recorder) Metadata(_ context.Context, req *brokerv1.MetadataRequest) (*brokerv1.MetadataResponse, error) {
	known := []string{"orders-1", "payroll", "orders-2"}
	names := req.GetTopics()
	if len(names) == 0 {
		names = known
	}
	resp := &brokerv1.MetadataResponse{ClusterId: "c"}
	for _, n := range names {
		tm := &brokerv1.TopicMetadata{Name: n, TopicId: "id-" + n, Partitions: []*brokerv1.PartitionMetadata{{Partition: 0, Leader: 1}}}
		if !slices.Contains(known, n) {
			tm = &brokerv1.TopicMetadata{Name: n, ErrorCode: commonv1.ErrorCode(kerr.UnknownTopicOrPartition)}
		}
		resp.Topics = append(resp.Topics, tm)
	}
	return resp, nil
}

func (r *recorder) ListFaults(context.Context, *faultv1.ListFaultsRequest) (*faultv1.ListFaultsResponse, error) {
	r.note("ListFaults")
	return &faultv1.ListFaultsResponse{}, nil
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

type fixture struct {
	pki  *authztest.PKI
	addr string
	rec  *recorder
	reg  *prometheus.Registry
	logs *bytes.Buffer
}

// serve runs a TLS server (certificate broker-1) with every tidemark
// service stubbed and the authorizer from o.
func serve(t *testing.T, aclText string, o authz.Options) *fixture {
	t.Helper()
	f := &fixture{pki: authztest.New(t, "broker-1"), rec: &recorder{}, reg: prometheus.NewRegistry(), logs: &bytes.Buffer{}}
	if aclText != "" {
		o.ACLFile = filepath.Join(t.TempDir(), "acl")
		if err := os.WriteFile(o.ACLFile, []byte(aclText), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if o.SuperUsers == nil {
		o.SuperUsers = authz.DefaultConfig().SuperUsers
	}
	o.Registry = f.reg
	o.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	a, err := authz.New(o)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := f.pki.Options("broker-1").ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	// The same interceptors grpcserver chains, on a server with TLS.
	mapErr := func(err error) error {
		if err == nil {
			return nil
		}
		return kerr.ToStatus(err).Err()
	}
	s := grpc.NewServer(creds,
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			return resp, mapErr(err)
		}, a.Unary()),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return mapErr(h(srv, ss))
		}, a.Stream()))
	controlv1.RegisterBrokerControlServiceServer(s, f.rec)
	controlv1.RegisterControllerServiceServer(s, f.rec)
	replicationv1.RegisterReplicationServiceServer(s, f.rec)
	adminv1.RegisterAdminServiceServer(s, f.rec)
	brokerv1.RegisterBrokerServiceServer(s, f.rec)
	faultv1.RegisterFaultInjectionServiceServer(s, f.rec)
	groupv1.RegisterGroupServiceServer(s, groupStub{})
	healthpb.RegisterHealthServer(s, healthAlways{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	f.addr = lis.Addr().String()
	return f
}

// groupStub answers every group call with two offsets (orders-1, payroll)
// and two groups, so a test sees what the filters trim.
type groupStub struct {
	groupv1.UnimplementedGroupServiceServer
}

func (groupStub) OffsetFetch(context.Context, *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	return &groupv1.OffsetFetchResponse{Topics: []*groupv1.OffsetFetchTopicResult{{Name: "orders-1"}, {Name: "payroll"}}}, nil
}

func (groupStub) ListGroups(context.Context, *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	return &groupv1.ListGroupsResponse{Groups: []*groupv1.ListedGroup{{GroupId: "app-1"}, {GroupId: "billing"}}}, nil
}

type healthAlways struct {
	healthpb.UnimplementedHealthServer
}

func (healthAlways) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (f *fixture) dial(t *testing.T, name string) *grpc.ClientConn {
	return f.pki.Dial(t, f.addr, name)
}

func TestControlRequestsOnlyFromTheControllerTheyName(t *testing.T) {
	f := serve(t, "", authz.Options{TLS: true})
	ctx := context.Background()
	for _, c := range []struct {
		cert string
		id   int32
		msg  string
	}{
		{"broker-2", 1, "User:broker-2 may not send LeaderAndIsr as controller 1"},
		{"controller-2", 1, "User:controller-2 may not send LeaderAndIsr as controller 1"},
		{"admin", 1, "User:admin may not send LeaderAndIsr as controller 1"}, // super users are not controllers
		{"gateway", 1, "User:gateway may not send LeaderAndIsr as controller 1"},
	} {
		_, err := controlv1.NewBrokerControlServiceClient(f.dial(t, c.cert)).LeaderAndIsr(ctx, &controlv1.LeaderAndIsrRequest{ControllerId: c.id, ControllerEpoch: 1 << 30})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, c.msg)
	}
	if got := f.rec.seen(); len(got) != 0 {
		t.Fatalf("refused requests reached the handler: %v", got)
	}
	if _, err := controlv1.NewBrokerControlServiceClient(f.dial(t, "controller-1")).LeaderAndIsr(ctx, &controlv1.LeaderAndIsrRequest{ControllerId: 1}); err != nil {
		t.Fatal(err)
	}
	// The handler sees the principal the interceptor decided.
	if got := f.rec.seen(); len(got) != 1 || got[0] != "LeaderAndIsr by controller-1" {
		t.Fatalf("handler saw %v", got)
	}
	if n := denied(t, f.reg, controlv1.BrokerControlService_LeaderAndIsr_FullMethodName, "broker"); n != 1 {
		t.Fatalf("tidemark_authz_denied_total for brokers on LeaderAndIsr = %v, want 1", n)
	}
	if n := denied(t, f.reg, controlv1.BrokerControlService_LeaderAndIsr_FullMethodName, "user"); n != 1 {
		t.Fatalf("tidemark_authz_denied_total for users on LeaderAndIsr = %v, want 1", n)
	}
	if !strings.Contains(f.logs.String(), "call refused by authorization") || !strings.Contains(f.logs.String(), "principal=\"broker-2 (broker 2)\"") {
		t.Fatalf("denial not logged with principal and method:\n%s", f.logs.String())
	}
}

// denied reads tidemark_authz_denied_total{method, principal_role}.
func denied(t *testing.T, reg *prometheus.Registry, method, role string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tidemark_authz_denied_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == method && labels["principal_role"] == role {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestReplicaFetchIsCheckedOnEveryMessage(t *testing.T) {
	f := serve(t, "", authz.Options{TLS: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := replicationv1.NewReplicationServiceClient(f.dial(t, "broker-3")).ReplicaFetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// As itself: served.
	if err := s.Send(&replicationv1.ReplicaFetchRequest{ReplicaId: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	// The same stream's next message claims replica 2: the stream ends with
	// the refusal and the handler never sees it.
	if err := s.Send(&replicationv1.ReplicaFetchRequest{ReplicaId: 2}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-3 may not fetch as replica 2")
	if got := f.rec.seen(); len(got) != 1 || got[0] != "ReplicaFetch as 3" {
		t.Fatalf("handler saw %v, want only the fetch as replica 3", got)
	}

	// A user's certificate cannot fetch as a replica at all, and a
	// consumer-style fetch (replica -1) is a Read on the topic.
	s2, err := replicationv1.NewReplicationServiceClient(f.dial(t, "alice")).ReplicaFetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = s2.Send(&replicationv1.ReplicaFetchRequest{ReplicaId: -1, Partitions: []*replicationv1.ReplicaFetchPartition{{Topic: "orders"}}})
	_, err = s2.Recv()
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Read on Topic:orders")
}

func TestBrokerSessionIsCheckedOnEveryMessageEvenIfTheHandlerSwallowsTheError(t *testing.T) {
	f := serve(t, "", authz.Options{TLS: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := controlv1.NewControllerServiceClient(f.dial(t, "broker-2")).BrokerSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&controlv1.BrokerSessionRequest{BrokerId: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&controlv1.BrokerSessionRequest{BrokerId: 1})
	_, err = s.Recv()
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-2 may not send BrokerSession as broker 1")
	if got := f.rec.seen(); len(got) != 1 || got[0] != "BrokerSession as 2" {
		t.Fatalf("handler saw %v", got)
	}
	// A user cannot even open one.
	s2, err := controlv1.NewControllerServiceClient(f.dial(t, "alice")).BrokerSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.Recv()
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice may not open a broker session: only brokers may")

	_, err = controlv1.NewControllerServiceClient(f.dial(t, "alice")).ControlledShutdown(ctx, &controlv1.ControlledShutdownRequest{BrokerId: 2, BrokerEpoch: 7})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice may not send ControlledShutdown as broker 2")
}

func TestUserCallsFollowTheACL(t *testing.T) {
	f := serve(t, "allow User:alice Write Topic:orders-*\nallow User:alice Describe Topic:orders-*\n", authz.Options{TLS: true})
	ctx := context.Background()
	alice := brokerv1.NewBrokerServiceClient(f.dial(t, "alice"))
	if _, err := alice.Produce(ctx, &brokerv1.ProduceRequest{Topic: "orders-1"}); err != nil {
		t.Fatal(err)
	}
	_, err := alice.Produce(ctx, &brokerv1.ProduceRequest{Topic: "other"})
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Write on Topic:other")
	_, err = alice.Fetch(ctx, &brokerv1.FetchRequest{Topic: "orders-1"})
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Read on Topic:orders-1")
	if got := f.rec.seen(); len(got) != 1 || got[0] != "Produce to orders-1" {
		t.Fatalf("handler saw %v", got)
	}
	// Write on some topic is enough for a producer id (Kafka's rule);
	// reaching the stub's Unimplemented means authorization passed.
	if _, err := alice.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("InitProducerId with a Write ACL: %v, want it past authorization", err)
	}
	_, err = brokerv1.NewBrokerServiceClient(f.dial(t, "bob")).InitProducerId(ctx, &brokerv1.InitProducerIdRequest{})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:bob is not allowed IdempotentWrite on Cluster:cluster")

	// Admin: no ACL, refused; listing topics shows only those allowed.
	admin := adminv1.NewAdminServiceClient(f.dial(t, "alice"))
	_, err = admin.DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{"orders-1"}})
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Delete on Topic:orders-1")
	_, err = admin.ElectLeaders(ctx, &adminv1.ElectLeadersRequest{AllPartitions: true})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice is not allowed Alter on Cluster:cluster")
	_, err = admin.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: "1"}}}})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice is not allowed AlterConfigs on Cluster:cluster")
	resp, err := admin.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range resp.GetTopics() {
		names = append(names, d.GetName())
	}
	if strings.Join(names, ",") != "orders-1,orders-2" {
		t.Fatalf("alice listed %v, want only orders-1,orders-2", names)
	}
	// A named topic she may not Describe is answered refused alone, as
	// Kafka's Metadata answers it; the others are described.
	resp, err = admin.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: []string{"orders-1", "payroll"}})
	if err != nil {
		t.Fatalf("DescribeTopics naming a refused topic: %v, want an answer per topic", err)
	}
	for _, d := range resp.GetTopics() {
		want := kerr.None
		if d.GetName() == "payroll" {
			want = kerr.TopicAuthorizationFailed
			if d.GetErrorMessage() != "User:alice is not allowed Describe on Topic:payroll" {
				t.Errorf("payroll refused with %q", d.GetErrorMessage())
			}
		}
		if kerr.Code(d.GetErrorCode()) != want {
			t.Errorf("%s answered %s, want %s", d.GetName(), kerr.Code(d.GetErrorCode()), want)
		}
	}

	// A super user bypasses the ACL; a gateway forwarding for alice is alice.
	if _, err := brokerv1.NewBrokerServiceClient(f.dial(t, "admin")).Produce(ctx, &brokerv1.ProduceRequest{Topic: "other"}); err != nil {
		t.Fatalf("super user: %v", err)
	}
	gw := brokerv1.NewBrokerServiceClient(f.dial(t, "gateway"))
	_, err = gw.Produce(identity.Forward(ctx, "alice"), &brokerv1.ProduceRequest{Topic: "other"})
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Write on Topic:other")
	if _, err := gw.Produce(identity.Forward(ctx, "alice"), &brokerv1.ProduceRequest{Topic: "orders-9"}); err != nil {
		t.Fatalf("gateway for alice: %v", err)
	}
	// A broker forwarding a Kafka client's call for alice is alice too.
	_, err = brokerv1.NewBrokerServiceClient(f.dial(t, "broker-2")).Produce(identity.Forward(ctx, "alice"), &brokerv1.ProduceRequest{Topic: "other"})
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Write on Topic:other")
	// The gateway forwarding a broker's name gets a user, not the broker.
	_, err = controlv1.NewBrokerControlServiceClient(f.dial(t, "gateway")).LeaderAndIsr(identity.Forward(ctx, "controller-1"), &controlv1.LeaderAndIsrRequest{ControllerId: 1})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:controller-1 may not send LeaderAndIsr as controller 1")
	// Health stays open to every certificate.
	if _, err := healthpb.NewHealthClient(f.dial(t, "nobody")).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}

// The broker's Metadata authorizes each topic as Kafka's Metadata does:
// listing every topic shows only those the caller may Describe, and a
// named topic it may not is TOPIC_AUTHORIZATION_FAILED with nothing else,
// whether it exists (payroll) or not (ghost), so the answer does not tell
// which. Before, every authenticated caller saw every topic.
func TestMetadataShowsOnlyDescribableTopics(t *testing.T) {
	f := serve(t, "allow User:alice Read Topic:orders-*\n", authz.Options{TLS: true})
	ctx := context.Background()
	alice := brokerv1.NewBrokerServiceClient(f.dial(t, "alice"))
	resp, err := alice.Metadata(ctx, &brokerv1.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range resp.GetTopics() {
		names = append(names, tm.GetName())
	}
	if strings.Join(names, ",") != "orders-1,orders-2" {
		t.Fatalf("alice's all-topics Metadata lists %v, want only orders-1,orders-2 (Read implies Describe)", names)
	}
	resp, err = alice.Metadata(ctx, &brokerv1.MetadataRequest{Topics: []string{"orders-1", "payroll", "ghost", "orders-9"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*brokerv1.TopicMetadata{}
	for _, tm := range resp.GetTopics() {
		got[tm.GetName()] = tm
	}
	if len(got) != 4 {
		t.Fatalf("answered %v, want one entry per named topic", resp.GetTopics())
	}
	if tm := got["orders-1"]; tm.GetErrorCode() != 0 || len(tm.GetPartitions()) != 1 {
		t.Errorf("orders-1: %v, want its metadata", tm)
	}
	if c := kerr.Code(got["orders-9"].GetErrorCode()); c != kerr.UnknownTopicOrPartition {
		t.Errorf("orders-9 (describable, missing): %s, want UNKNOWN_TOPIC_OR_PARTITION", c)
	}
	for _, name := range []string{"payroll", "ghost"} {
		tm := got[name]
		if kerr.Code(tm.GetErrorCode()) != kerr.TopicAuthorizationFailed || len(tm.GetPartitions()) != 0 || tm.GetTopicId() != "" ||
			tm.GetErrorMessage() != "User:alice is not allowed Describe on Topic:"+name {
			t.Errorf("%s: %v, want TOPIC_AUTHORIZATION_FAILED naming alice and nothing else", name, tm)
		}
	}
	// A super user sees everything.
	resp, err = brokerv1.NewBrokerServiceClient(f.dial(t, "admin")).Metadata(ctx, &brokerv1.MetadataRequest{})
	if err != nil || len(resp.GetTopics()) != 3 {
		t.Fatalf("admin: %v %v, want all three topics", resp.GetTopics(), err)
	}
}

// Group calls follow Kafka's group ACLs: Read on the group to take part and
// commit (plus Read on each topic committed), Describe to look, Delete to
// delete; lists show only what the caller may Describe.
func TestGroupCallsFollowTheACL(t *testing.T) {
	f := serve(t, "allow User:alice Read Group:app-*\nallow User:alice Read Topic:orders-*\n", authz.Options{TLS: true})
	ctx := context.Background()
	alice := groupv1.NewGroupServiceClient(f.dial(t, "alice"))
	past := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("%s: %v, want it past authorization", what, err)
		}
	}
	_, err := alice.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "app-1"})
	past("JoinGroup app-1", err)
	_, err = alice.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "billing"})
	authztest.WantRefused(t, err, kerr.GroupAuthorizationFailed, "User:alice is not allowed Read on Group:billing")
	_, err = alice.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: "app-1"})
	past("FindCoordinator app-1 (Read implies Describe)", err)
	_, err = alice.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app-1", Topics: []*groupv1.OffsetCommitTopic{{Name: "orders-1"}}})
	past("OffsetCommit orders-1", err)
	_, err = alice.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "app-1", Topics: []*groupv1.OffsetCommitTopic{{Name: "payroll"}}})
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Read on Topic:payroll")
	_, err = alice.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"app-1"}})
	authztest.WantRefused(t, err, kerr.GroupAuthorizationFailed, "User:alice is not allowed Delete on Group:app-1")
	_, err = alice.OffsetDelete(ctx, &groupv1.OffsetDeleteRequest{GroupId: "app-1", Topics: []*groupv1.OffsetDeleteTopic{{Name: "orders-1"}}})
	authztest.WantRefused(t, err, kerr.GroupAuthorizationFailed, "User:alice is not allowed Delete on Group:app-1")
	_, err = alice.ResetGroupOffsets(ctx, &groupv1.ResetGroupOffsetsRequest{GroupId: "billing"})
	authztest.WantRefused(t, err, kerr.GroupAuthorizationFailed, "User:alice is not allowed Read on Group:billing")

	fetched, err := alice.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app-1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fetched.GetTopics()); n != 1 || fetched.GetTopics()[0].GetName() != "orders-1" {
		t.Fatalf("alice fetched offsets of %v, want only orders-1", fetched.GetTopics())
	}
	// Naming a topic she may not Describe refuses that topic alone: the
	// partitions she named, and the topic's own code.
	fetched, err = alice.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "app-1",
		Topics: []*groupv1.OffsetFetchTopic{{Name: "orders-1"}, {Name: "payroll", Partitions: []int32{0, 1}}}})
	if err != nil {
		t.Fatalf("OffsetFetch naming a refused topic: %v, want an answer per topic", err)
	}
	if ts := fetched.GetTopics(); len(ts) != 2 || ts[0].GetErrorCode() != 0 || kerr.Code(ts[1].GetErrorCode()) != kerr.TopicAuthorizationFailed ||
		len(ts[1].GetPartitions()) != 2 || kerr.Code(ts[1].GetPartitions()[1].GetErrorCode()) != kerr.TopicAuthorizationFailed || ts[1].GetPartitions()[1].GetCommittedOffset() != -1 {
		t.Fatalf("alice fetched %v, want orders-1 and payroll's partitions 0 and 1 refused", ts)
	}
	listed, err := alice.ListGroups(ctx, &groupv1.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(listed.GetGroups()); n != 1 || listed.GetGroups()[0].GetGroupId() != "app-1" {
		t.Fatalf("alice listed %v, want only app-1", listed.GetGroups())
	}
}

func TestFaultInjectionNeedsTheSwitchAndTheACL(t *testing.T) {
	ctx := context.Background()
	acl := "allow User:chaos InjectFault Cluster\n"
	off := serve(t, acl, authz.Options{TLS: true})
	_, err := faultv1.NewFaultInjectionServiceClient(off.dial(t, "chaos")).ListFaults(ctx, &faultv1.ListFaultsRequest{})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:chaos may not use the fault-injection API: it is disabled on this broker")

	on := serve(t, acl, authz.Options{TLS: true, FaultInjection: true})
	_, err = faultv1.NewFaultInjectionServiceClient(on.dial(t, "alice")).ListFaults(ctx, &faultv1.ListFaultsRequest{})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice is not allowed InjectFault on Cluster:cluster")
	if _, err := faultv1.NewFaultInjectionServiceClient(on.dial(t, "chaos")).ListFaults(ctx, &faultv1.ListFaultsRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := append(off.rec.seen(), on.rec.seen()...); len(got) != 1 {
		t.Fatalf("handlers saw %v, want the one allowed ListFaults", got)
	}
}

func TestPlaintextPassesEverythingAndSaysSoOnce(t *testing.T) {
	var logs bytes.Buffer
	a, err := authz.New(authz.Options{Config: authz.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if a.Enabled() {
		t.Fatal("plaintext authorizer says it is enabled")
	}
	if _, err := a.Authorize(context.Background(), controlv1.BrokerControlService_LeaderAndIsr_FullMethodName, &controlv1.LeaderAndIsrRequest{ControllerId: 1}); err != nil {
		t.Fatalf("plaintext refused: %v", err)
	}
	if n := strings.Count(logs.String(), "authorization is OFF"); n != 1 || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("want one warning at start, got:\n%s", logs.String())
	}
	// With TLS on, a caller without a verified certificate is not
	// authenticated (the TLS handshake normally stops it first).
	on, err := authz.New(authz.Options{Config: authz.DefaultConfig(), TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = on.Authorize(context.Background(), brokerv1.BrokerService_Metadata_FullMethodName, &brokerv1.MetadataRequest{})
	if e := kerr.As(err); e == nil || e.Code != kerr.SaslAuthenticationFailed || !strings.Contains(e.Message, "not authenticated") {
		t.Fatalf("anonymous with TLS on: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if kerr.Lookup(kerr.SaslAuthenticationFailed).GRPC != codes.Unauthenticated {
		t.Fatal("SASL_AUTHENTICATION_FAILED must travel as Unauthenticated")
	}
}

// Every method of every tidemark service has a policy, and a server with a
// method that has none does not start.
func TestEveryTidemarkMethodHasAPolicy(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{})
	r := &recorder{}
	controlv1.RegisterBrokerControlServiceServer(s, r)
	controlv1.RegisterControllerServiceServer(s, r)
	replicationv1.RegisterReplicationServiceServer(s, r)
	adminv1.RegisterAdminServiceServer(s, r)
	brokerv1.RegisterBrokerServiceServer(s, r)
	faultv1.RegisterFaultInjectionServiceServer(s, r)
	groupv1.RegisterGroupServiceServer(s, groupv1.UnimplementedGroupServiceServer{})
	devclusterv1.RegisterDevClusterServiceServer(s, devclusterv1.UnimplementedDevClusterServiceServer{})
	if err := authz.Covers(s.GetServiceInfo()); err != nil {
		t.Fatal(err)
	}
	// And no policy guards a method that does not exist (a renamed RPC
	// would leave its old policy behind and its new name unguarded).
	methods := map[string]bool{}
	for name, svc := range s.GetServiceInfo() {
		for _, m := range svc.Methods {
			methods["/"+name+"/"+m.Name] = true
		}
	}
	for m := range authz.Policies() {
		if !methods[m] {
			t.Errorf("policy for %s, which no service has", m)
		}
	}

	a, err := authz.New(authz.Options{Config: authz.DefaultConfig(), TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	bad := grpcserver.New(grpcserver.Options{Authorizer: a})
	bad.RegisterService(&grpc.ServiceDesc{ServiceName: "tidemark.new.v1.NewService", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "DoThing", Handler: func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) { return nil, nil }}}}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Serve(lis)
	if err == nil || err.Error() != "authz: no policy for /tidemark.new.v1.NewService/DoThing" {
		t.Fatalf("Serve with an unguarded method: %v", err)
	}
	if _, err := a.Authorize(identity.With(context.Background(), identity.Parse("admin")), "/tidemark.new.v1.NewService/DoThing", nil); kerr.CodeOf(err) != kerr.ClusterAuthorizationFailed {
		t.Fatalf("a method with no policy, even for a super user: %v", err)
	}
}

// A stream's messages are decided by the caller's host as every other call
// is (found once per stream): a rule for the caller's own host lets each
// message through, one for another host refuses the first.
func TestStreamMessagesAreDecidedByTheCallersHost(t *testing.T) {
	f := serve(t, "allow User:alice Read Topic:orders host=127.0.0.1\nallow User:alice Read Topic:audit host=10.0.0.9\n", authz.Options{TLS: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fetch := func(topic string) *replicationv1.ReplicaFetchRequest {
		return &replicationv1.ReplicaFetchRequest{ReplicaId: -1, Partitions: []*replicationv1.ReplicaFetchPartition{{Topic: topic}}}
	}
	s, err := replicationv1.NewReplicationServiceClient(f.dial(t, "alice")).ReplicaFetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Send(fetch("orders")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("message %d from the rule's host: %v", i, err)
		}
	}
	if err := s.Send(fetch("audit")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Read on Topic:audit")
}

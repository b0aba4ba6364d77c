package clustertest

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/authz/authztest"
	"tidemark.io/services/platform/kerr"
)

// testACL is the ACL file of the refusal catalogue's cluster: alice may
// write orders-* and nothing else; chaos may inject faults.
const testACL = `# refusal catalogue
allow User:alice Write Topic:orders-*
allow User:chaos InjectFault Cluster
`

// secureCluster is a 3-broker cluster over mutual TLS with testACL on every
// node, fault injection on broker 1 only, and a long replica.lag.time.max.ms
// so a follower that cannot fetch stays in the ISR for the whole test.
func secureCluster(t *testing.T) (*Cluster, *authztest.PKI) {
	t.Helper()
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte(testACL), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Start(t, Options{
		Secure:         true,
		BrokerSettings: map[string]string{"replica.lag.time.max.ms": "120000"},
		Adjust: func(cfg *broker.Config) {
			cfg.Authz.ACLFile = acl
			cfg.FaultInjection = cfg.ID == 1
		},
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl },
	})
	return c, &authztest.PKI{Dir: c.PKIDir}
}

func (c *Cluster) brokerAddr(id int32) string { return c.BrokerConfig(id).Listen }

func (c *Cluster) activeAddr(t *testing.T) (int32, string) {
	t.Helper()
	id, _ := c.ActiveController()
	if id < 0 {
		t.Fatal("no active controller")
	}
	return id, c.ctrlCfg[id].Listen
}

func TestRefusalCatalogueOverMutualTLS(t *testing.T) {
	c, certs := secureCluster(t)
	ctx := context.Background()
	c.CreateTopic("t", 1, 3, nil)
	for _, v := range []string{"a", "b", "c"} {
		if _, err := c.Produce(ctx, "t", 0, -1, v); err != nil {
			t.Fatal(err)
		}
	}
	logs := c.SameLogs("t", 0, 1, 2, 3)

	t.Run("every served method has a policy", func(t *testing.T) {
		for id := int32(1); id <= 3; id++ {
			if err := authz.Covers(c.Broker(id).Services()); err != nil {
				t.Errorf("broker %d: %v", id, err)
			}
		}
		for id, ct := range c.controllers {
			if err := authz.Covers(ct.Services()); err != nil {
				t.Errorf("controller %d: %v", id, err)
			}
		}
	})

	// A broker's certificate sends broker 1 the control requests that,
	// unguarded, would empty it: none reaches it.
	t.Run("control requests from a broker certificate", func(t *testing.T) {
		ctrlID, _ := c.activeAddr(t)
		bc := controlv1.NewBrokerControlServiceClient(certs.Dial(t, c.brokerAddr(1), "broker-2"))
		_, err := bc.UpdateMetadata(ctx, &controlv1.UpdateMetadataRequest{ControllerId: ctrlID, ControllerEpoch: math.MaxInt32, Full: true})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-2 may not send UpdateMetadata as controller")
		_, err = bc.StopReplica(ctx, &controlv1.StopReplicaRequest{ControllerId: ctrlID, ControllerEpoch: math.MaxInt32,
			Partitions: []*controlv1.StopReplicaPartition{{Topic: "t", Partition: 0, LeaderEpoch: math.MaxInt32, Delete: true}}})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-2 may not send StopReplica as controller")
		_, err = bc.LeaderAndIsr(ctx, &controlv1.LeaderAndIsrRequest{ControllerId: ctrlID, ControllerEpoch: math.MaxInt32})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-2 may not send LeaderAndIsr as controller")

		// Broker 1 still hosts its replica, on disk, with every record.
		if _, _, ok := c.Broker(1).ReplicaOffsets("t", 0); !ok {
			t.Fatal("broker 1 no longer hosts t-0")
		}
		if _, err := os.Stat(filepath.Join(c.BrokerConfig(1).DataDir, "t-0")); err != nil {
			t.Fatalf("t-0's log directory: %v", err)
		}
		if got := c.Values(1, "t", 0); !slices.Equal(got, logs) {
			t.Fatalf("broker 1's log %v, want %v", got, logs)
		}
	})

	// A huge controller epoch from a non-controller would fence the real
	// controller out; refused, the real controller still drives broker 1.
	t.Run("LeaderAndIsr at controller epoch MaxInt32 from a non-controller", func(t *testing.T) {
		ctrlID, _ := c.activeAddr(t)
		for _, cert := range []string{"mallory", "broker-3", "admin"} {
			bc := controlv1.NewBrokerControlServiceClient(certs.Dial(t, c.brokerAddr(1), cert))
			_, err := bc.LeaderAndIsr(ctx, &controlv1.LeaderAndIsrRequest{ControllerId: ctrlID, ControllerEpoch: math.MaxInt32, BrokerEpoch: 0})
			authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:"+cert+" may not send LeaderAndIsr as controller")
		}
		c.CreateTopic("after-forgery", 1, 3, nil)
		c.WaitFor(10*time.Second, "broker 1 applying the real controller's LeaderAndIsr after the forgery", func() bool {
			_, _, ok := c.Broker(1).ReplicaOffsets("after-forgery", 0)
			return ok
		})
	})

	t.Run("broker 3 claiming to be replica 2", func(t *testing.T) {
		leader := c.Partition("t", 0).GetLeader()
		s, err := replicationv1.NewReplicationServiceClient(certs.Dial(t, c.brokerAddr(leader), "broker-3")).ReplicaFetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Send(&replicationv1.ReplicaFetchRequest{ReplicaId: 2, Partitions: []*replicationv1.ReplicaFetchPartition{{Topic: "t"}}})
		_, err = s.Recv()
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-3 may not fetch as replica 2")
		_, err = replicationv1.NewReplicationServiceClient(certs.Dial(t, c.brokerAddr(leader), "broker-3")).OffsetForLeaderEpoch(ctx,
			&replicationv1.OffsetForLeaderEpochRequest{ReplicaId: 2})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-3 may not ask leader epochs as replica 2")
	})

	// A user presents broker 2's epoch (DescribeCluster shows it) in a
	// ControlledShutdown: refused, and broker 2 keeps its leadership.
	t.Run("forged ControlledShutdown", func(t *testing.T) {
		c.CreateTopic("led-by-2", 1, 3, nil)
		leader := c.Leader("led-by-2", 0)
		var epoch int64
		dc, err := c.Admin().DescribeCluster(ctx, &adminv1.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range dc.GetBrokers() {
			if b.GetNode().GetId() == leader {
				epoch = b.GetBrokerEpoch()
			}
		}
		_, addr := c.activeAddr(t)
		forgers := []string{"alice", "broker-" + itoa(leader%3+1)}
		errs := make([]error, len(forgers))
		for i, cert := range forgers {
			_, errs[i] = controlv1.NewControllerServiceClient(certs.Dial(t, addr, cert)).ControlledShutdown(ctx,
				&controlv1.ControlledShutdownRequest{BrokerId: leader, BrokerEpoch: epoch})
		}
		if got := c.Partition("led-by-2", 0).GetLeader(); got != leader {
			t.Errorf("leader moved from %d to %d", leader, got)
		}
		for i, cert := range forgers {
			authztest.WantRefused(t, errs[i], kerr.ClusterAuthorizationFailed, "User:"+cert+" may not send ControlledShutdown as broker "+itoa(leader))
		}
		dc, err = c.Admin().DescribeCluster(ctx, &adminv1.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range dc.GetBrokers() {
			if b.GetShuttingDown() || !b.GetAlive() {
				t.Fatalf("broker %d: alive=%v shutting_down=%v after refused forgeries", b.GetNode().GetId(), b.GetAlive(), b.GetShuttingDown())
			}
		}
	})

	t.Run("admin calls without an ACL", func(t *testing.T) {
		_, addr := c.activeAddr(t)
		admin := adminv1.NewAdminServiceClient(certs.Dial(t, addr, "alice"))
		_, err := admin.CreateTopics(ctx, &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{Name: "x", NumPartitions: 1, ReplicationFactor: 1}}})
		authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Create on Topic:x")
		_, err = admin.DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{"t"}})
		authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed Delete on Topic:t")
		_, err = admin.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
			Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"},
			Ops:      []*adminv1.ConfigOp{{Name: "retention.ms", Value: "1", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}}}})
		authztest.WantRefused(t, err, kerr.TopicAuthorizationFailed, "User:alice is not allowed AlterConfigs on Topic:t")
		_, err = admin.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
			Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER},
			Ops:      []*adminv1.ConfigOp{{Name: "unclean.leader.election.enable", Value: "true", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}}}})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice is not allowed AlterConfigs on Cluster:cluster")
		_, err = admin.ElectLeaders(ctx, &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_UNCLEAN, AllPartitions: true})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice is not allowed Alter on Cluster:cluster")
		_, err = admin.DescribeCluster(ctx, &adminv1.DescribeClusterRequest{})
		authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:alice is not allowed Describe on Cluster:cluster")

		// Nothing changed: t is there with its records and default
		// retention, x does not exist.
		topics, err := c.Admin().DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: []string{"t", "x"}, IncludeConfigs: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, td := range topics.GetTopics() {
			switch td.GetName() {
			case "t":
				if td.GetErrorCode() != 0 || td.GetConfigs()["retention.ms"] == "1" {
					t.Fatalf("t changed: %v", td)
				}
			case "x":
				if td.GetErrorCode() != commonv1.ErrorCode(kerr.UnknownTopicOrPartition) {
					t.Fatalf("x exists after a refused create: %v", td)
				}
			}
		}
		if got := c.Values(1, "t", 0); !slices.Equal(got, logs) {
			t.Fatalf("t's log %v, want %v", got, logs)
		}
	})

	t.Run("prefix Write ACL", func(t *testing.T) {
		c.CreateTopic("orders-1", 1, 3, nil)
		c.CreateTopic("other", 1, 3, nil)
		produce := func(topic string) error {
			leader := c.Leader(topic, 0)
			_, err := brokerv1.NewBrokerServiceClient(certs.Dial(t, c.brokerAddr(leader), "alice")).Produce(ctx, &brokerv1.ProduceRequest{
				Topic: topic, Acks: -1, TimeoutMs: 5000, Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record("v")}}})
			return err
		}
		if err := produce("orders-1"); err != nil {
			t.Fatalf("alice writing orders-1: %v", err)
		}
		authztest.WantRefused(t, produce("other"), kerr.TopicAuthorizationFailed, "User:alice is not allowed Write on Topic:other")
		if got := c.Values(c.Partition("other", 0).GetLeader(), "other", 0); len(got) != 0 {
			t.Fatalf("other holds %v after a refused write", got)
		}

		// On a produce stream each request is decided on its own: the
		// refused one is answered with the refusal, the stream goes on.
		leader := c.Partition("orders-1", 0).GetLeader()
		st, err := brokerv1.NewBrokerServiceClient(certs.Dial(t, c.brokerAddr(leader), "alice")).ProduceStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, topic := range []string{"other", "orders-1"} {
			if err := st.Send(&brokerv1.ProduceStreamRequest{CorrelationId: uint64(i), Request: &brokerv1.ProduceRequest{
				Topic: topic, Acks: -1, TimeoutMs: 5000, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: encodedBatch(-1, -1, -1, "streamed")}}}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			m := recvWithin(t, st, 10*time.Second)
			switch m.GetCorrelationId() {
			case 0:
				authztest.WantRefused(t, kerr.ToStatus(kerr.FromDetail(m.GetError())).Err(), kerr.TopicAuthorizationFailed, "User:alice is not allowed Write on Topic:other")
			case 1:
				if m.GetError() != nil {
					t.Fatalf("alice writing orders-1 on the stream after a refusal: %v", m.GetError())
				}
			}
		}
		if got := c.Values(c.Partition("other", 0).GetLeader(), "other", 0); len(got) != 0 {
			t.Fatalf("other holds %v after a refused streamed write", got)
		}
	})

	t.Run("fault injection", func(t *testing.T) {
		list := func(id int32, cert string) error {
			_, err := faultv1.NewFaultInjectionServiceClient(certs.Dial(t, c.brokerAddr(id), cert)).ListFaults(ctx, &faultv1.ListFaultsRequest{})
			return err
		}
		authztest.WantRefused(t, list(2, "chaos"), kerr.ClusterAuthorizationFailed, "User:chaos may not use the fault-injection API: it is disabled on this broker")
		authztest.WantRefused(t, list(1, "alice"), kerr.ClusterAuthorizationFailed, "User:alice is not allowed InjectFault on Cluster:cluster")
		if err := list(1, "chaos"); err != nil {
			t.Fatalf("chaos on the broker with fault injection: %v", err)
		}
	})

	// Last: it cuts a link. A follower that cannot fetch holds back an
	// acks=all write; a fetch forged in its name (broker epoch 0, fetch
	// offset = the leader's LEO) would, unguarded, advance the HW and
	// acknowledge a write only the leader has.
	t.Run("forged follower fetch cannot advance the HW", func(t *testing.T) {
		c.CreateTopic("acked", 1, 2, map[string]string{"min.insync.replicas": "2"})
		pd := c.Partition("acked", 0)
		leader, follower := pd.GetLeader(), pd.GetReplicas()[1]
		if follower == leader {
			follower = pd.GetReplicas()[0]
		}
		if _, err := c.Produce(ctx, "acked", 0, -1, "before"); err != nil {
			t.Fatal(err)
		}
		hw0, _, _ := c.Broker(leader).ReplicaOffsets("acked", 0)
		c.Net.Cut(BrokerName(follower), BrokerName(leader))
		defer c.Net.Heal(BrokerName(follower), BrokerName(leader))

		produced := make(chan error, 1)
		go func() {
			_, err := c.BrokerClient(leader).Produce(ctx, &brokerv1.ProduceRequest{Topic: "acked", Acks: -1, TimeoutMs: 3000,
				Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record("held")}}})
			produced <- err
		}()
		var leo int64
		c.WaitFor(5*time.Second, "the held write appended on the leader", func() bool {
			_, leo, _ = c.Broker(leader).ReplicaOffsets("acked", 0)
			return leo > hw0
		})
		// The follower's real broker epoch is public (DescribeCluster); a
		// forgery with it passes every check but the certificate's.
		var realEpoch int64
		dc, err := c.Admin().DescribeCluster(ctx, &adminv1.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range dc.GetBrokers() {
			if b.GetNode().GetId() == follower {
				realEpoch = b.GetBrokerEpoch()
			}
		}
		forge := func(cert string, epoch int64) error {
			s, err := replicationv1.NewReplicationServiceClient(certs.Dial(t, c.brokerAddr(leader), cert)).ReplicaFetch(ctx)
			if err != nil {
				return err
			}
			_ = s.Send(&replicationv1.ReplicaFetchRequest{ReplicaId: follower, BrokerEpoch: epoch, MaxBytes: 1 << 20,
				Partitions: []*replicationv1.ReplicaFetchPartition{{Topic: "acked", FetchOffset: leo, CurrentLeaderEpoch: pd.GetLeaderEpoch(), LastFetchedEpoch: pd.GetLeaderEpoch()}}})
			_, err = s.Recv()
			return err
		}
		other := int32(1)
		for other == leader || other == follower {
			other++
		}
		forgeries := []struct {
			cert  string
			epoch int64
		}{{"mallory", 0}, {"mallory", realEpoch}, {BrokerName(other), 0}, {BrokerName(other), realEpoch}}
		errs := make([]error, len(forgeries))
		for i, f := range forgeries {
			errs[i] = forge(f.cert, f.epoch)
		}

		// The outcome first: the write is not acknowledged and the HW
		// stays, then the refusals themselves.
		err = <-produced
		if got := kerr.FromStatus(err); err == nil || got.Code != kerr.RequestTimedOut {
			t.Errorf("acks=all write with its follower cut off: %v, want REQUEST_TIMED_OUT (not acknowledged)", err)
		}
		if hw, _, _ := c.Broker(leader).ReplicaOffsets("acked", 0); hw != hw0 {
			t.Errorf("HW moved from %d to %d with the only follower cut off", hw0, hw)
		}
		for i, f := range forgeries {
			authztest.WantRefused(t, errs[i], kerr.ClusterAuthorizationFailed, "User:"+f.cert+" may not fetch as replica "+itoa(follower))
		}
	})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

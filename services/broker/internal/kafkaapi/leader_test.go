package kafkaapi

import (
	"encoding/base64"
	"fmt"
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
)

// testTopicID is topic "t"'s id as the controller names it (16 bytes,
// URL-safe base64).
var testTopicID = base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef"))

// withLeader is a Server on broker 1, the leader of t-0 with replicas and
// ISR {1, 2}, in memory. Broker 2 never fetches: an acks=all write to t-0
// waits for its timeout.
func withLeader(t *testing.T) *Server {
	t.Helper()
	return withLeaderOf(t, 1)
}

// withLeaderOf is withLeader leading t-0 to t-(partitions-1), each as
// withLeader leads t-0.
func withLeaderOf(t *testing.T, partitions int32) *Server {
	t.Helper()
	return withLeaderConfigured(t, partitions, nil)
}

// withLeaderConfigured is withLeaderOf with static broker configs.
func withLeaderConfigured(t *testing.T, partitions int32, static map[string]string) *Server {
	t.Helper()
	return withLeaderOfTopics(t, partitions, static, "t")
}

// withLeaderOfTopics is withLeaderConfigured leading each of topics as it
// leads t (t with testTopicID, another with an id made of its name).
func withLeaderOfTopics(t *testing.T, partitions int32, static map[string]string, topics ...string) *Server {
	t.Helper()
	return withLeaderRegistered(t, partitions, static, nil, topics...)
}

// withLeaderRegistered is withLeaderOfTopics with the replica manager's
// metrics in reg (nil: none).
func withLeaderRegistered(t *testing.T, partitions int32, static map[string]string, reg prometheus.Registerer, topics ...string) *Server {
	t.Helper()
	logs, err := logstore.OpenManager(logstore.ManagerOptions{FS: vfs.NewMem(), Dir: "/data", NoBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	meta := metadata.New()
	settings := map[string]string{"replica.lag.time.max.ms": "600000"}
	maps.Copy(settings, static)
	rm, err := replica.New(replica.Options{BrokerID: 1, Logs: logs, Meta: meta, Static: settings, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rm.Close()
		_ = logs.Close()
	})
	var ps []*commonv1.PartitionState
	var tc []*controlv1.TopicConfig
	for _, topic := range topics {
		for p := range partitions {
			ps = append(ps, &commonv1.PartitionState{Topic: topic, Partition: p, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
				Replicas: []int32{1, 2}, Isr: []int32{1, 2}})
		}
		id := testTopicID
		if topic != "t" {
			id = base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%-16.16s", topic)))
		}
		tc = append(tc, &controlv1.TopicConfig{Topic: topic, TopicId: id})
	}
	um := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: 1, Full: true, ClusterId: "c",
		Controller: &commonv1.Node{Id: 100, Address: "controller:9190"}, Partitions: ps, TopicConfigs: tc}
	for _, id := range []int32{1, 2} {
		um.Brokers = append(um.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: id, Address: "b"}})
	}
	if err := rm.UpdateMetadata(um); err != nil {
		t.Fatal(err)
	}
	resp, err := rm.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions: ps, TopicConfigs: tc})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPartitions() {
		if c := kerr.Code(p.GetErrorCode()); c != kerr.None {
			t.Fatalf("LeaderAndIsr: %s %s", c, p.GetErrorMessage())
		}
	}
	return New(Options{BrokerID: 1, RM: rm, Broker: &grpcapi.Broker{RM: rm}})
}

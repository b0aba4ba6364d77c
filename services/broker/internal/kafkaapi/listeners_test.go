package kafkaapi

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// registerEndpoints re-registers brokers 1 and 2 of withLeader's cluster
// with the given endpoints (t-0 still led by 1, replicas and ISR {1, 2}).
func registerEndpoints(t *testing.T, s *Server, endpoints map[int32]map[string]string) {
	t.Helper()
	um := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: 1, Full: true, ClusterId: "c",
		Controller: &commonv1.Node{Id: 100, Address: "controller:9190"},
		Partitions: []*commonv1.PartitionState{{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
			Replicas: []int32{1, 2}, Isr: []int32{1, 2}}},
		TopicConfigs: []*controlv1.TopicConfig{{Topic: "t", TopicId: testTopicID}}}
	for _, id := range []int32{1, 2} {
		um.Brokers = append(um.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: id, Address: "b"}, Endpoints: endpoints[id]})
	}
	if err := s.opts.RM.UpdateMetadata(um); err != nil {
		t.Fatal(err)
	}
}

func metadataOn(t *testing.T, s *Server, listener string, version int16) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	topic := "t"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	return s.handleMetadata(context.Background(), &reqCtx{listener: listener}, req).(*kmsg.MetadataResponse)
}

func brokerAddrs(resp *kmsg.MetadataResponse) map[int32]string {
	out := map[int32]string{}
	for _, b := range resp.Brokers {
		out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return out
}

// Metadata names each broker by its endpoint on the listener the request
// arrived on and leaves out brokers without it; a partition whose live
// leader lacks the listener has no leader and LISTENER_NOT_FOUND (from v6;
// LEADER_NOT_AVAILABLE before), its replicas and ISR kept, as Kafka
// answers. A registration from before named listeners (one "kafka"
// address) is read as that address on every listener.
func TestMetadataAnswersOnTheRequestsListener(t *testing.T) {
	s := withLeader(t)
	registerEndpoints(t, s, map[int32]map[string]string{
		1: {"kafka": "kafka1:19092", "kafka.INTERNAL": "kafka1:19092", "kafka.EXTERNAL": "localhost:9092"},
		2: {"kafka": "kafka2:19092", "kafka.INTERNAL": "kafka2:19092"},
	})
	for _, tc := range []struct {
		listener string
		want     map[int32]string
	}{
		{"INTERNAL", map[int32]string{1: "kafka1:19092", 2: "kafka2:19092"}},
		{"EXTERNAL", map[int32]string{1: "localhost:9092"}},
		{"", map[int32]string{1: "kafka1:19092", 2: "kafka2:19092"}},
	} {
		resp := metadataOn(t, s, tc.listener, 12)
		if got := brokerAddrs(resp); !maps.Equal(got, tc.want) {
			t.Errorf("brokers on %q: %v, want %v", tc.listener, got, tc.want)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Leader != 1 {
			t.Errorf("t-0 on %q: %s leader %d, want leader 1", tc.listener, kerr.Code(p.ErrorCode), p.Leader)
		}
	}

	// Broker 1 leads t-0 and has no REPLICATION listener.
	for version, want := range map[int16]int16{12: listenerNotFound, 6: listenerNotFound, 5: int16(kerr.LeaderNotAvailable)} {
		resp := metadataOn(t, s, "REPLICATION", version)
		if len(resp.Brokers) != 0 {
			t.Errorf("v%d on REPLICATION: brokers %v, want none", version, brokerAddrs(resp))
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != want || p.Leader != -1 || !slices.Equal(p.Replicas, []int32{1, 2}) || !slices.Equal(p.ISR, []int32{1, 2}) {
			t.Errorf("v%d t-0 on REPLICATION: code %d leader %d replicas %v isr %v; want code %d, leader -1, replicas and isr [1 2]",
				version, p.ErrorCode, p.Leader, p.Replicas, p.ISR, want)
		}
	}

	// Broker 2 still runs a release that registered one address.
	registerEndpoints(t, s, map[int32]map[string]string{
		1: {"kafka": "kafka1:19092", "kafka.INTERNAL": "kafka1:19092", "kafka.EXTERNAL": "localhost:9092"},
		2: {"kafka": "old2:9092"},
	})
	if got, want := brokerAddrs(metadataOn(t, s, "EXTERNAL", 12)), map[int32]string{1: "localhost:9092", 2: "old2:9092"}; !maps.Equal(got, want) {
		t.Errorf("with an old registration, brokers on EXTERNAL: %v, want %v", got, want)
	}
}

// DescribeCluster lists the brokers with the request's listener, at their
// endpoints on it.
func TestDescribeClusterAnswersOnTheRequestsListener(t *testing.T) {
	s := withLeader(t)
	registerEndpoints(t, s, map[int32]map[string]string{
		1: {"kafka": "kafka1:19092", "kafka.INTERNAL": "kafka1:19092", "kafka.EXTERNAL": "localhost:9092"},
		2: {"kafka": "kafka2:19092", "kafka.INTERNAL": "kafka2:19092"},
	})
	for listener, want := range map[string]map[int32]string{
		"INTERNAL": {1: "kafka1:19092", 2: "kafka2:19092"},
		"EXTERNAL": {1: "localhost:9092"},
	} {
		req := kmsg.NewPtrDescribeClusterRequest()
		resp := s.handleDescribeCluster(context.Background(), &reqCtx{listener: listener}, req).(*kmsg.DescribeClusterResponse)
		got := map[int32]string{}
		for _, b := range resp.Brokers {
			got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if resp.ErrorCode != 0 || !maps.Equal(got, want) {
			t.Errorf("on %s: code %d brokers %v, want %v", listener, resp.ErrorCode, got, want)
		}
	}
}

// Produce v10's leader endpoints (KIP-951) are the leaders' addresses on
// the request's listener; a leader without it is not named.
func TestProduceLeaderEndpointsOnTheRequestsListener(t *testing.T) {
	s := withLeader(t)
	registerEndpoints(t, s, map[int32]map[string]string{
		1: {"kafka": "kafka1:19092", "kafka.INTERNAL": "kafka1:19092", "kafka.EXTERNAL": "localhost:9092"},
		2: {"kafka": "kafka2:19092", "kafka.INTERNAL": "kafka2:19092"},
	})
	answer := func(listener string) map[int32]string {
		resp := kmsg.NewPtrProduceResponse()
		rt := kmsg.NewProduceResponseTopic()
		for i, leader := range []int32{1, 2} {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.CurrentLeader.LeaderID = int32(i), leader
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		s.addLeaderEndpoints(resp, listener)
		got := map[int32]string{}
		for _, b := range resp.Brokers {
			got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		return got
	}
	if got, want := answer("INTERNAL"), map[int32]string{1: "kafka1:19092", 2: "kafka2:19092"}; !maps.Equal(got, want) {
		t.Errorf("on INTERNAL: %v, want %v", got, want)
	}
	if got, want := answer("EXTERNAL"), map[int32]string{1: "localhost:9092"}; !maps.Equal(got, want) {
		t.Errorf("on EXTERNAL: %v, want %v", got, want)
	}
}

// max.connections.per.ip is one limit across a broker's listeners, as
// Kafka counts them: a client holding its one connection on one listener
// is refused on the other.
func TestConnectionsPerIPCountAcrossListeners(t *testing.T) {
	s := New(Options{Limits: Limits{MaxConnectionsPerIP: 1}})
	var addrs []string
	done := make(chan error, 2)
	for _, name := range []string{"INTERNAL", "EXTERNAL"} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, lis.Addr().String())
		go func() { done <- s.ServeListener(Listener{Name: name}, lis) }()
	}
	t.Cleanup(func() {
		s.Close()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("ServeListener: %v", err)
			}
		}
	})
	first := dial(t, addrs[0])
	if _, err := first.Write(frame(apiVersions(3), 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, first); err != nil {
		t.Fatal(err)
	}
	second := dial(t, addrs[1])
	_, _ = second.Write(frame(apiVersions(3), 2))
	if _, _, err := readAnswer(t, second); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("a second connection from one address, on the other listener: %v, want it closed", err)
	}
}

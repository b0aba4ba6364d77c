package kafkaclients

import (
	"maps"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/loopback"
)

// namedListeners gives brokers 1 and 2 an INTERNAL listener advertising
// its bound address and an EXTERNAL one advertised as localhost, and
// broker 3 INTERNAL alone. It returns each listener's advertised
// addresses by broker.
func namedListeners(t *testing.T) (func(*broker.Config), map[string]map[int32]string) {
	advertised := map[string]map[int32]string{"INTERNAL": {}, "EXTERNAL": {}}
	return func(cfg *broker.Config) {
		names := []string{"INTERNAL", "EXTERNAL"}
		if cfg.ID == 3 {
			names = names[:1]
		}
		cfg.KafkaNamedListeners = map[string]net.Listener{}
		cfg.KafkaListeners, cfg.KafkaAdvertisedListeners = nil, nil
		for _, name := range names {
			l, err := loopback.Listen()
			if err != nil {
				t.Fatal(err)
			}
			cfg.KafkaNamedListeners[name] = l
			addr := l.Addr().String()
			cfg.KafkaListeners = append(cfg.KafkaListeners, name+"://"+addr)
			if name == "EXTERNAL" {
				_, port, _ := net.SplitHostPort(addr)
				addr = "localhost:" + port
				cfg.KafkaAdvertisedListeners = append(cfg.KafkaAdvertisedListeners, name+"://"+addr)
			}
			advertised[name][cfg.ID] = addr
		}
		cfg.KafkaProtocolMap = config.StringList{"INTERNAL:PLAINTEXT", "EXTERNAL:PLAINTEXT"}
	}, advertised
}

// Each named Kafka listener tells its clients the brokers' addresses on
// that listener, as Kafka's Metadata, DescribeCluster and FindCoordinator
// do: a client bootstrapped on either listener of a broker produces and
// consumes; a broker without the listener is left out, a partition it
// leads has no leader there (LISTENER_NOT_FOUND), and a group it
// coordinates is COORDINATOR_NOT_AVAILABLE there.
func TestKafkaNamedListenersAnswerTheirOwnAddresses(t *testing.T) {
	adjust, advertised := namedListeners(t)
	c := clustertest.Start(t, clustertest.Options{Adjust: adjust})
	seeds := func(listener string) []string {
		var out []string
		for _, a := range advertised[listener] {
			out = append(out, a)
		}
		return out
	}
	clientOn := func(listener string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds(listener)...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	internal, external := clientOn("INTERNAL"), clientOn("EXTERNAL")

	create := kmsg.NewPtrCreateTopicsRequest()
	for name, replicas := range map[string][]int32{"pair": {1, 2}, "on3": {3}} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, -1, -1
		ct.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: replicas}}
		create.Topics = append(create.Topics, ct)
	}
	cresp, err := create.RequestWith(clustertest.CtxFor(t, 20*time.Second), internal)
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range cresp.Topics {
		if ct.ErrorCode != 0 {
			t.Fatalf("create %s: code %d", ct.Topic, ct.ErrorCode)
		}
	}
	c.WaitFor(10*time.Second, "leaders", func() bool {
		return c.Leads(c.Partition("pair", 0).GetLeader(), "pair", 0) && c.Leads(3, "on3", 0)
	})

	for _, listener := range []string{"INTERNAL", "EXTERNAL"} {
		cl := map[string]*kgo.Client{"INTERNAL": internal, "EXTERNAL": external}[listener]
		req := kmsg.NewPtrMetadataRequest()
		for _, topic := range []string{"pair", "on3"} {
			req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(topic)})
		}
		// Every broker learns the new topics; until then one may answer
		// UNKNOWN_TOPIC_OR_PARTITION.
		var resp *kmsg.MetadataResponse
		c.WaitFor(10*time.Second, "both topics in Metadata on "+listener, func() bool {
			r, err := req.RequestWith(clustertest.CtxFor(t, 10*time.Second), cl)
			if err != nil {
				t.Fatal(err)
			}
			resp = r
			for _, rt := range r.Topics {
				if rt.ErrorCode != 0 || len(rt.Partitions) != 1 {
					return false
				}
			}
			return len(r.Topics) == 2
		})
		got := map[int32]string{}
		for _, b := range resp.Brokers {
			got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if !maps.Equal(got, advertised[listener]) {
			t.Errorf("Metadata on %s names brokers %v, want %v", listener, got, advertised[listener])
		}
		for _, rt := range resp.Topics {
			p := rt.Partitions[0]
			switch {
			case *rt.Topic == "on3" && listener == "EXTERNAL":
				if p.ErrorCode != 72 || p.Leader != -1 || len(p.Replicas) != 1 || p.Replicas[0] != 3 {
					t.Errorf("on3 on EXTERNAL: code %d leader %d replicas %v; want LISTENER_NOT_FOUND (72), leader -1, replicas [3]", p.ErrorCode, p.Leader, p.Replicas)
				}
			case p.ErrorCode != 0 || p.Leader < 1:
				t.Errorf("%s on %s: code %d leader %d", *rt.Topic, listener, p.ErrorCode, p.Leader)
			}
		}

		dreq := kmsg.NewPtrDescribeClusterRequest()
		dresp, err := dreq.RequestWith(clustertest.CtxFor(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		got = map[int32]string{}
		for _, b := range dresp.Brokers {
			got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if !maps.Equal(got, advertised[listener]) {
			t.Errorf("DescribeCluster on %s names brokers %v, want %v", listener, got, advertised[listener])
		}
	}

	// A client on either listener writes and reads.
	for _, listener := range []string{"INTERNAL", "EXTERNAL"} {
		cl := clientOn(listener)
		clustertest.ProduceSync(t, cl, "pair", "via-"+listener)
	}
	for _, listener := range []string{"INTERNAL", "EXTERNAL"} {
		cons := clientOn(listener, kgo.ConsumeTopics("pair"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if got := consumeAll(t, cons, 2)[0]; len(got) != 2 || got[0] != "via-INTERNAL" || got[1] != "via-EXTERNAL" {
			t.Fatalf("read on %s: %q", listener, got)
		}
	}

	// FindCoordinator: each group's coordinator at its address on the
	// request's listener; broker 3's groups have none on EXTERNAL.
	groups := map[int32]int{}
	for i := range 30 {
		group := "g" + strconv.Itoa(i)
		var coord int32 = -1
		c.WaitFor(20*time.Second, "coordinator of "+group, func() bool {
			r := findCoordinator(t, internal, group)
			coord = r.NodeID
			return r.ErrorCode == 0
		})
		groups[coord]++
		in := findCoordinator(t, internal, group)
		if addr := net.JoinHostPort(in.Host, strconv.Itoa(int(in.Port))); addr != advertised["INTERNAL"][coord] {
			t.Errorf("%s on INTERNAL: coordinator %d at %s, want %s", group, coord, addr, advertised["INTERNAL"][coord])
		}
		ex := findCoordinator(t, external, group)
		want, has := advertised["EXTERNAL"][coord]
		switch addr := net.JoinHostPort(ex.Host, strconv.Itoa(int(ex.Port))); {
		case has && (ex.ErrorCode != 0 || ex.NodeID != coord || addr != want):
			t.Errorf("%s on EXTERNAL: code %d coordinator %d at %s, want %d at %s", group, ex.ErrorCode, ex.NodeID, addr, coord, want)
		case !has && ex.ErrorCode != 15:
			t.Errorf("%s on EXTERNAL (coordinator %d lacks it): code %d, want COORDINATOR_NOT_AVAILABLE (15)", group, coord, ex.ErrorCode)
		}
	}
	if groups[3] == 0 || groups[1]+groups[2] == 0 {
		t.Errorf("coordinators by broker: %v; want groups on broker 3 and on the others", groups)
	}
}

func findCoordinator(t *testing.T, cl *kgo.Client, group string) *kmsg.FindCoordinatorResponse {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.SetVersion(3) // one key, top-level answer; a Kafka client's request goes to any broker
	resp, err := req.RequestWith(clustertest.CtxFor(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"tidemark.io/gateway"
)

// produced is a ProduceResponse as REST renders it (int64s as strings).
type produced struct {
	BaseOffset  int64 `json:"baseOffset,string"`
	LastOffset  int64 `json:"lastOffset,string"`
	LeaderEpoch int32 `json:"leaderEpoch"`
}

// produceBody is the body the page's Produce button sends.
func produceBody(acks, count int) map[string]any {
	var recs []map[string]any
	for i := range count {
		recs = append(recs, map[string]any{"value": base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "console #%d", i))})
	}
	return map[string]any{"acks": acks, "timeoutMs": 10000, "records": map[string]any{"records": recs}}
}

// alterTopic is the body of the page's Apply: each config set, or deleted
// when its value is empty.
func alterTopic(topic string, configs map[string]string) map[string]any {
	var ops []map[string]any
	for name, value := range configs {
		op := map[string]any{"name": name, "value": value, "op": "CONFIG_OP_TYPE_SET"}
		if value == "" {
			op = map[string]any{"name": name, "op": "CONFIG_OP_TYPE_DELETE"}
		}
		ops = append(ops, op)
	}
	return map[string]any{"resources": []any{map[string]any{
		"resource": map[string]any{"type": "CONFIG_RESOURCE_TYPE_TOPIC", "name": topic}, "ops": ops}}}
}

func electBody(typ, topic string, partition int32) map[string]any {
	return map[string]any{"electionType": typ, "timeoutMs": 5000,
		"partitions": []any{map[string]any{"topic": topic, "partition": partition}}}
}

// elected is an ElectLeadersResponse.
type elected struct {
	Results []struct {
		Leader    int32  `json:"leader"`
		ErrorCode string `json:"errorCode"`
	} `json:"results"`
}

// nodeAction is the answer of /v1/dev/nodes/{name}:action.
type nodeAction struct {
	Node struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"node"`
}

func nodePath(id int32) string { return fmt.Sprintf("/v1/dev/nodes/broker-%d:action", id) }

// The console's actions against a real in-process cluster: each goes
// through the gateway's REST API under /v1 (the routes the page's buttons
// call) and its effect shows on the console's event stream; refusals come
// by name in the one REST error body.
func TestLiveCluster(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("orders", 2, 3, map[string]string{"min.insync.replicas": "2"})
	dev := serveDevCluster(t, tc)
	base := serveGateway(t, tc, gateway.ConsoleOptions{Actions: true, DevControl: dev, JaegerUI: "http://127.0.0.1:16686"})

	s := openSSE(t, base)
	hello := s.next("hello", 5*time.Second)
	if string(hello.data) == "" {
		t.Fatal("empty hello")
	}
	snap := s.waitSnapshot(10*time.Second, "three live brokers and both partitions fully replicated", func(s *snapshot) bool {
		if len(s.Brokers) != 3 || len(s.Partitions) != 2 || s.Controller.ID < 0 || s.Controller.Epoch <= 0 {
			return false
		}
		for _, b := range s.Brokers {
			if b.State != "up" || b.Process != "running" {
				return false
			}
		}
		for _, p := range s.Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 || len(p.Views) != 3 || p.MinISR != 2 {
				return false
			}
		}
		return len(s.Topics) == 1 && s.Topics[0].Unclean != nil
	})
	t.Logf("first snapshot: %s", describe(snap))

	t.Run("produce acks=all", func(t *testing.T) {
		var res produced
		code, e := post(t, base, "/v1/topics/orders/partitions/0/records", produceBody(-1, 5), &res)
		if code != http.StatusOK || res.BaseOffset < 0 || res.LastOffset != res.BaseOffset+4 {
			t.Fatalf("produce: %d %+v %+v", code, e, res)
		}
		// Each follower's LEO twice: as it reports it and as the leader
		// knows it (its last fetch offset); the leader has only its own.
		s.waitSnapshot(5*time.Second, "the HW and every replica's LEO past the records, as each follower and its leader see it", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			if p == nil || p.HW <= res.LastOffset {
				return false
			}
			for _, v := range p.Views {
				if v.LEO <= res.LastOffset || (v.Leader != (v.LeaderLEO == nil)) || (!v.Leader && *v.LeaderLEO <= res.LastOffset) {
					return false
				}
			}
			return true
		})
		if code, e := post(t, base, "/v1/topics/orders/partitions/9/records", produceBody(-1, 1), nil); code != http.StatusNotFound || e.Name != "UNKNOWN_TOPIC_OR_PARTITION" {
			t.Fatalf("produce to a missing partition: %d %+v", code, e)
		}
		if code, e := post(t, base, "/v1/topics/orders/partitions/0/records", produceBody(2, 1), nil); code != http.StatusBadRequest || e.Name != "INVALID_REQUIRED_ACKS" {
			t.Fatalf("produce with acks=2: %d %+v", code, e)
		}
	})

	t.Run("topic configs", func(t *testing.T) {
		if code, e := post(t, base, "/v1/configs:alter", alterTopic("orders", map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}), nil); code != http.StatusOK {
			t.Fatalf("alter configs: %d %+v", code, e)
		}
		s.waitSnapshot(5*time.Second, "the new configs", func(s *snapshot) bool {
			return len(s.Topics) == 1 && s.Topics[0].Unclean != nil && *s.Topics[0].Unclean && s.Topics[0].MinISR == 1
		})
		// Back: unclean deleted (its default, false), min ISR set.
		if code, e := post(t, base, "/v1/configs:alter", alterTopic("orders", map[string]string{"unclean.leader.election.enable": "", "min.insync.replicas": "2"}), nil); code != http.StatusOK {
			t.Fatalf("alter configs back: %d %+v", code, e)
		}
		s.waitSnapshot(5*time.Second, "the configs back", func(s *snapshot) bool {
			return s.Topics[0].Unclean != nil && !*s.Topics[0].Unclean && s.Topics[0].MinISR == 2
		})
		if code, e := post(t, base, "/v1/configs:alter", alterTopic("orders", map[string]string{"min.insync.replicas": "zero"}), nil); code != http.StatusBadRequest || e.Name != "INVALID_CONFIG" {
			t.Fatalf("bad min.insync.replicas: %d %+v", code, e)
		}
		if code, e := post(t, base, "/v1/configs:alter", alterTopic("nosuch", map[string]string{"min.insync.replicas": "2"}), nil); code == http.StatusOK || e.Name != "UNKNOWN_TOPIC_OR_PARTITION" {
			t.Fatalf("configs of a missing topic: %d %+v", code, e)
		}
	})

	t.Run("elections not needed", func(t *testing.T) {
		// REST answers 200 with the item's code: the leader already is the
		// one asked for (the page shows it as a refusal by that name).
		for _, typ := range []string{"ELECTION_TYPE_PREFERRED", "ELECTION_TYPE_UNCLEAN"} {
			var res elected
			code, e := post(t, base, "/v1/elect-leaders", electBody(typ, "orders", 0), &res)
			if code != http.StatusOK || len(res.Results) != 1 || res.Results[0].ErrorCode != "ERROR_CODE_ELECTION_NOT_NEEDED" {
				t.Fatalf("%s with a healthy leader: %d %+v %+v, want ELECTION_NOT_NEEDED", typ, code, e, res)
			}
		}
	})

	t.Run("stall a follower", func(t *testing.T) {
		p := s.waitSnapshot(5*time.Second, "orders-1", func(s *snapshot) bool { return s.partition("orders", 1) != nil }).partition("orders", 1)
		var f int32 = -1
		for _, r := range p.Replicas {
			if r != p.Leader {
				f = r
				break
			}
		}
		faults := fmt.Sprintf("/v1/brokers/%d/faults", f)
		var set struct {
			Faults []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Stall     bool   `json:"stall"`
			} `json:"faults"`
		}
		code, e := post(t, base, faults, map[string]any{"fault": map[string]any{"topic": "orders", "partition": 1, "stall": true}}, &set)
		if code != http.StatusOK || len(set.Faults) != 1 || !set.Faults[0].Stall || set.Faults[0].Topic != "orders" || set.Faults[0].Partition != 1 {
			t.Fatalf("stall: %d %+v %+v", code, e, set)
		}
		start := time.Now()
		// The stalled follower is out once the leader's LEO moves past it
		// and replica.lag.time.max.ms (2 s) passes.
		if code, e := post(t, base, "/v1/topics/orders/partitions/1/records", produceBody(1, 3), nil); code != http.StatusOK {
			t.Fatalf("produce acks=1: %d %+v", code, e)
		}
		s.waitSnapshot(10*time.Second, "the stalled follower out of the ISR", func(s *snapshot) bool {
			p := s.partition("orders", 1)
			if p == nil || contains(p.ISR, f) || p.Leader < 0 {
				return false
			}
			for _, v := range p.Views {
				if v.Broker == f && v.Fault != nil && v.Fault.Stall && !v.InISR {
					return true
				}
			}
			return false
		})
		t.Logf("B%d left the ISR of orders-1 %s after the stall", f, time.Since(start).Round(time.Millisecond))
		if code, e := post(t, base, faults+":clear", map[string]any{}, nil); code != http.StatusOK {
			t.Fatalf("clear: %d %+v", code, e)
		}
		s.waitSnapshot(10*time.Second, "the follower back in the ISR, without its fault", func(s *snapshot) bool {
			p := s.partition("orders", 1)
			if p == nil || !contains(p.ISR, f) {
				return false
			}
			for _, v := range p.Views {
				if v.Broker == f && v.Fault != nil {
					return false
				}
			}
			return true
		})
		if code, e := post(t, base, "/v1/brokers/99/faults", map[string]any{"fault": map[string]any{"stall": true}}, nil); code != http.StatusServiceUnavailable || e.Name != "BROKER_NOT_AVAILABLE" || e.Field != "broker_id" {
			t.Fatalf("a fault on a broker the cluster does not have: %d %+v", code, e)
		}
	})

	t.Run("kill the leader through the launcher, then a preferred election", func(t *testing.T) {
		p := s.waitSnapshot(5*time.Second, "orders-0 fully replicated", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return p != nil && p.Leader >= 0 && len(p.ISR) == 3
		}).partition("orders", 0)
		l := p.Leader
		var res nodeAction
		start := time.Now()
		if code, e := post(t, base, nodePath(l), map[string]any{"action": "ACTION_KILL"}, &res); code != http.StatusOK || res.Node.State != "NODE_STATE_EXITED" {
			t.Fatalf("kill B%d: %d %+v %+v", l, code, e, res)
		}
		after := s.waitSnapshot(8*time.Second, "the killed leader down, a new leader and the ISR shrunk", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return s.brokerState(l) == "down" && p != nil && p.Leader >= 0 && p.Leader != l && !contains(p.ISR, l) &&
				p.LeaderEpoch > 0
		})
		np := after.partition("orders", 0)
		t.Logf("after killing B%d: leader B%d (epoch %d), ISR %v, %s later", l, np.Leader, np.LeaderEpoch, np.ISR, time.Since(start).Round(time.Millisecond))
		if code, e := post(t, base, nodePath(l), map[string]any{"action": "ACTION_KILL"}, nil); code != http.StatusConflict || e.Name != "FAILED_PRECONDITION" {
			t.Fatalf("killing a dead broker: %d %+v", code, e)
		}
		if code, e := post(t, base, nodePath(l), map[string]any{"action": "ACTION_EXPLODE"}, nil); code != http.StatusBadRequest || e.Name != "INVALID_REQUEST" {
			t.Fatalf("unknown node action: %d %+v", code, e)
		}
		if code, e := post(t, base, nodePath(l), map[string]any{"action": "ACTION_START"}, &res); code != http.StatusOK || res.Node.State != "NODE_STATE_RUNNING" {
			t.Fatalf("start B%d: %d %+v", l, code, e)
		}
		s.waitSnapshot(15*time.Second, "the restarted broker back in the ISR", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return s.brokerState(l) == "up" && p != nil && contains(p.ISR, l)
		})
		// The preferred replica (the first assigned) leads again after a
		// preferred election.
		pref := p.Replicas[0]
		cur := s.waitSnapshot(5*time.Second, "orders-0", func(s *snapshot) bool { return s.partition("orders", 0) != nil }).partition("orders", 0)
		if cur.Leader == pref {
			t.Fatalf("B%d leads orders-0 already; the kill should have moved it", pref)
		}
		var el elected
		if code, e := post(t, base, "/v1/elect-leaders", electBody("ELECTION_TYPE_PREFERRED", "orders", 0), &el); code != http.StatusOK ||
			len(el.Results) != 1 || el.Results[0].Leader != pref || el.Results[0].ErrorCode != "ERROR_CODE_UNSPECIFIED" {
			t.Fatalf("preferred election: %d %+v %+v, want B%d", code, e, el, pref)
		}
		s.waitSnapshot(5*time.Second, "the preferred replica leading orders-0", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return p != nil && p.Leader == pref
		})
	})

	t.Run("controller failover", func(t *testing.T) {
		old, oldEpoch := tc.ActiveController()
		start := time.Now()
		tc.StopController(old)
		after := s.waitSnapshot(10*time.Second, "another active controller with a newer controller_epoch", func(s *snapshot) bool {
			return s.Controller.ID >= 0 && s.Controller.ID != old && s.Controller.Epoch > oldEpoch
		})
		t.Logf("controller C%d (epoch %d) replaced C%d (epoch %d) on the stream %s after the stop",
			after.Controller.ID, after.Controller.Epoch, old, oldEpoch, time.Since(start).Round(time.Millisecond))
	})

	t.Run("not enough replicas", func(t *testing.T) {
		p := s.waitSnapshot(10*time.Second, "orders-0 fully replicated", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return p != nil && p.Leader >= 0 && len(p.ISR) == 3
		}).partition("orders", 0)
		var crashed []int32
		for _, r := range p.Replicas {
			if r != p.Leader {
				tc.CrashBroker(r)
				crashed = append(crashed, r)
			}
		}
		s.waitSnapshot(10*time.Second, "the ISR down to the leader", func(s *snapshot) bool {
			q := s.partition("orders", 0)
			return q != nil && slices.Equal(q.ISR, []int32{p.Leader}) && q.UnderMinISR &&
				s.brokerState(crashed[0]) == "down" && s.brokerState(crashed[1]) == "down"
		})
		// The stream shows the controller's decision; the leader refuses
		// only once it has applied it (a write parked before that waits for
		// an HW that cannot move under min ISR and times out instead).
		tc.WaitFor(10*time.Second, "the leader applying the shrunk ISR", func() bool {
			isr, ok := tc.ReplicaISR(p.Leader, "orders", 0)
			return ok && slices.Equal(isr, []int32{p.Leader})
		})
		code, e := post(t, base, "/v1/topics/orders/partitions/0/records", produceBody(-1, 2), nil)
		if code != http.StatusServiceUnavailable || e.Name != "NOT_ENOUGH_REPLICAS" || e.Code != 19 {
			t.Fatalf("acks=all with %v crashed: %d %+v, want 503 NOT_ENOUGH_REPLICAS", crashed, code, e)
		}
		t.Logf("refused: %s: %s", e.Name, e.Message)
		var res produced
		if code, e := post(t, base, "/v1/topics/orders/partitions/0/records", produceBody(1, 2), &res); code != http.StatusOK || res.LastOffset != res.BaseOffset+1 {
			t.Fatalf("acks=1 with the ISR at the leader alone: %d %+v %+v", code, e, res)
		}
		if code, e := post(t, base, fmt.Sprintf("/v1/brokers/%d/faults", crashed[0]), map[string]any{"fault": map[string]any{"stall": true}}, nil); code != http.StatusServiceUnavailable || e.Name != "BROKER_NOT_AVAILABLE" {
			t.Fatalf("fault on a dead broker: %d %+v", code, e)
		}
	})
}

// A cut of the link between two brokers goes through the same REST routes
// as the other faults (the gateway sends it to the broker whose sending is
// cut): cut from leader 1 to follower 2, broker 2 leaves the ISR while
// broker 3 stays; healed, it rejoins.
func TestLinkCutOverREST(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("links", 1, 3, map[string]string{"min.insync.replicas": "2"})
	base := serveGateway(t, tc, gateway.ConsoleOptions{Actions: true})
	p := tc.Partition("links", 0)
	var l, f int32 = p.GetLeader(), -1
	for _, r := range p.GetReplicas() {
		if r != l {
			f = r
			break
		}
	}
	type links struct {
		Links []struct {
			ToBrokerID int32 `json:"toBrokerId"`
		} `json:"links"`
	}
	var cut links
	if code, e := post(t, base, fmt.Sprintf("/v1/brokers/%d/links/%d:cut", l, f), map[string]any{}, &cut); code != http.StatusOK ||
		len(cut.Links) != 1 || cut.Links[0].ToBrokerID != f {
		t.Fatalf("cut B%d → B%d: %d %+v %+v", l, f, code, e, cut)
	}
	resp, err := http.Get(base + fmt.Sprintf("/v1/brokers/%d/faults", l))
	if err != nil {
		t.Fatal(err)
	}
	var listed links
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if err != nil || len(listed.Links) != 1 || listed.Links[0].ToBrokerID != f {
		t.Fatalf("GET faults of B%d: %v %+v", l, err, listed)
	}
	if code, e := post(t, base, fmt.Sprintf("/v1/brokers/%d/links/%d:cut", l, l), map[string]any{}, nil); code != http.StatusBadRequest ||
		e.Name != "INVALID_REQUEST" || e.Field != "to_broker_id" {
		t.Fatalf("a broker cut from itself: %d %+v", code, e)
	}

	if code, e := post(t, base, "/v1/topics/links/partitions/0/records", produceBody(1, 3), nil); code != http.StatusOK {
		t.Fatalf("produce acks=1: %d %+v", code, e)
	}
	tc.WaitFor(10*time.Second, fmt.Sprintf("B%d out of the ISR, the third replica in it", f), func() bool {
		p := tc.Partition("links", 0)
		return p.GetLeader() == l && len(p.GetIsr()) == 2 && !contains(p.GetIsr(), f)
	})
	if code, e := post(t, base, fmt.Sprintf("/v1/brokers/%d/links/%d:heal", l, f), map[string]any{}, nil); code != http.StatusOK {
		t.Fatalf("heal: %d %+v", code, e)
	}
	tc.WaitFor(10*time.Second, fmt.Sprintf("B%d back in the ISR", f), func() bool { return len(tc.Partition("links", 0).GetIsr()) == 3 })
}

// An isolation of the leader from etcd, the controllers and (peers: true)
// the other brokers goes through the REST routes too: the controller
// elects another leader and counts the isolated broker dead, so the
// brokers' metadata no longer lists it, yet the gateway still finds it (the
// controller knows its last address) to list its faults and heal it;
// healed, it rejoins the ISR.
func TestIsolationOverREST(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("iso", 1, 3, nil)
	base := serveGateway(t, tc, gateway.ConsoleOptions{Actions: true})
	p := tc.Partition("iso", 0)
	l := p.GetLeader()
	if code, e := post(t, base, fmt.Sprintf("/v1/brokers/%d/isolation:cut", l), map[string]any{"peers": true}, nil); code != http.StatusOK {
		t.Fatalf("isolate B%d: %d %+v", l, code, e)
	}
	tc.WaitFor(20*time.Second, "another leader with a higher epoch", func() bool {
		q := tc.Partition("iso", 0)
		return q.GetLeader() > 0 && q.GetLeader() != l && q.GetLeaderEpoch() > p.GetLeaderEpoch()
	})
	// Until the survivors' metadata drops it, the gateway finds it there.
	tc.WaitFor(10*time.Second, fmt.Sprintf("B%d gone from the brokers' metadata", l), func() bool {
		md, err := tc.Client().Metadata(context.Background())
		if err != nil {
			return false
		}
		for _, b := range md.GetBrokers() {
			if b.GetId() == l {
				return false
			}
		}
		return true
	})
	resp, err := http.Get(base + fmt.Sprintf("/v1/brokers/%d/faults", l))
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Isolated          bool `json:"isolated"`
		IsolatedFromPeers bool `json:"isolatedFromPeers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !listed.Isolated || !listed.IsolatedFromPeers {
		t.Fatalf("GET faults of the isolated B%d: %d %v %+v", l, resp.StatusCode, err, listed)
	}
	if code, e := post(t, base, fmt.Sprintf("/v1/brokers/%d/isolation:heal", l), map[string]any{}, nil); code != http.StatusOK {
		t.Fatalf("heal the isolation of B%d: %d %+v", l, code, e)
	}
	tc.WaitFor(30*time.Second, fmt.Sprintf("B%d back in the ISR", l), func() bool { return len(tc.Partition("iso", 0).GetIsr()) == 3 })
}

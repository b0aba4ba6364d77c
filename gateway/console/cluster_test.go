package console_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"tidemark.io/gateway/console"
)

type produceResult struct {
	Requested   int            `json:"requested"`
	Succeeded   int            `json:"succeeded"`
	Failed      int            `json:"failed"`
	FirstOffset int64          `json:"firstOffset"`
	LastOffset  int64          `json:"lastOffset"`
	Errors      map[string]int `json:"errors"`
}

// The console against a real in-process cluster: the event stream shows
// it and follows changes; every action does what it says or is refused by
// name.
func TestLiveCluster(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("orders", 2, 3, map[string]string{"min.insync.replicas": "2"})
	dev := serveDevCluster(t, tc)
	_, srv := serveConsole(t, tc, console.Options{EnableActions: true, DevControl: dev, JaegerUI: "http://127.0.0.1:16686"})
	base := srv.URL

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
		var res produceResult
		code, e := post(t, base, "/console/api/produce", map[string]any{"topic": "orders", "partition": 0, "count": 5, "acks": "all"}, &res)
		if code != http.StatusOK || res.Succeeded != 5 || res.Failed != 0 || res.FirstOffset < 0 || res.LastOffset != res.FirstOffset+4 {
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
		if code, e := post(t, base, "/console/api/produce", map[string]any{"topic": "orders", "partition": 9}, nil); code != http.StatusNotFound || e.Name != "UNKNOWN_TOPIC_OR_PARTITION" {
			t.Fatalf("produce to a missing partition: %d %+v", code, e)
		}
		if code, e := post(t, base, "/console/api/produce", map[string]any{"topic": "orders", "partition": 0, "acks": "2"}, nil); code != http.StatusBadRequest || e.Name != "INVALID_REQUEST" {
			t.Fatalf("produce with acks=2: %d %+v", code, e)
		}
	})

	t.Run("topic configs", func(t *testing.T) {
		path := "/console/api/topics/orders/configs"
		if code, e := post(t, base, path, map[string]any{"configs": map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}}, nil); code != http.StatusOK {
			t.Fatalf("alter configs: %d %+v", code, e)
		}
		s.waitSnapshot(5*time.Second, "the new configs", func(s *snapshot) bool {
			return len(s.Topics) == 1 && s.Topics[0].Unclean != nil && *s.Topics[0].Unclean && s.Topics[0].MinISR == 1
		})
		if code, e := post(t, base, path, map[string]any{"configs": map[string]string{"unclean.leader.election.enable": "false", "min.insync.replicas": "2"}}, nil); code != http.StatusOK {
			t.Fatalf("alter configs back: %d %+v", code, e)
		}
		s.waitSnapshot(5*time.Second, "the configs back", func(s *snapshot) bool {
			return s.Topics[0].Unclean != nil && !*s.Topics[0].Unclean && s.Topics[0].MinISR == 2
		})
		if code, e := post(t, base, path, map[string]any{"configs": map[string]string{"min.insync.replicas": "zero"}}, nil); code != http.StatusBadRequest {
			t.Fatalf("bad min.insync.replicas: %d %+v", code, e)
		}
		if code, e := post(t, base, path, map[string]any{"configs": map[string]string{"retention.ms": "1"}}, nil); code != http.StatusBadRequest {
			t.Fatalf("a config the console does not change: %d %+v", code, e)
		}
		if code, e := post(t, base, "/console/api/topics/nosuch/configs", map[string]any{"configs": map[string]string{"min.insync.replicas": "2"}}, nil); code == http.StatusOK || e.Name != "UNKNOWN_TOPIC_OR_PARTITION" {
			t.Fatalf("configs of a missing topic: %d %+v", code, e)
		}
	})

	t.Run("elections", func(t *testing.T) {
		for _, typ := range []string{"preferred", "unclean"} {
			code, e := post(t, base, "/console/api/elections", map[string]any{"type": typ, "topic": "orders", "partition": 0}, nil)
			if code != http.StatusConflict || e.Name != "ELECTION_NOT_NEEDED" {
				t.Fatalf("%s election with a healthy leader: %d %+v, want 409 ELECTION_NOT_NEEDED", typ, code, e)
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
		code, e := post(t, base, "/console/api/faults", map[string]any{"broker": f, "topic": "orders", "partition": 1, "stall": true}, nil)
		if code != http.StatusOK {
			t.Fatalf("stall: %d %+v", code, e)
		}
		start := time.Now()
		// The stalled follower is out once the leader's LEO moves past it
		// and replica.lag.time.max.ms (2 s) passes.
		if code, e := post(t, base, "/console/api/produce", map[string]any{"topic": "orders", "partition": 1, "count": 3, "acks": "1"}, nil); code != http.StatusOK {
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
		if code, e := post(t, base, "/console/api/faults/clear", map[string]any{"broker": f}, nil); code != http.StatusOK {
			t.Fatalf("clear: %d %+v", code, e)
		}
		s.waitSnapshot(10*time.Second, "the follower back in the ISR", func(s *snapshot) bool {
			p := s.partition("orders", 1)
			return p != nil && contains(p.ISR, f)
		})
		if code, e := post(t, base, "/console/api/faults", map[string]any{"broker": f, "topic": "orders", "partition": 1}, nil); code != http.StatusBadRequest {
			t.Fatalf("a fault that is neither stall nor delay: %d %+v", code, e)
		}
	})

	t.Run("kill the leader through the launcher", func(t *testing.T) {
		p := s.waitSnapshot(5*time.Second, "orders-0 fully replicated", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return p != nil && p.Leader >= 0 && len(p.ISR) == 3
		}).partition("orders", 0)
		l := p.Leader
		var res struct{ Process string }
		start := time.Now()
		if code, e := post(t, base, "/console/api/brokers/"+strconv.Itoa(int(l))+"/kill", map[string]any{}, &res); code != http.StatusOK || res.Process != "exited" {
			t.Fatalf("kill B%d: %d %+v %+v", l, code, e, res)
		}
		after := s.waitSnapshot(8*time.Second, "the killed leader down, a new leader and the ISR shrunk", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return s.brokerState(l) == "down" && p != nil && p.Leader >= 0 && p.Leader != l && !contains(p.ISR, l) &&
				p.LeaderEpoch > 0
		})
		np := after.partition("orders", 0)
		t.Logf("after killing B%d: leader B%d (epoch %d), ISR %v, %s later", l, np.Leader, np.LeaderEpoch, np.ISR, time.Since(start).Round(time.Millisecond))
		if code, e := post(t, base, "/console/api/brokers/"+strconv.Itoa(int(l))+"/kill", map[string]any{}, nil); code != http.StatusConflict || e.Name != "FAILED_PRECONDITION" {
			t.Fatalf("killing a dead broker: %d %+v", code, e)
		}
		if code, e := post(t, base, "/console/api/brokers/"+strconv.Itoa(int(l))+"/explode", map[string]any{}, nil); code != http.StatusBadRequest {
			t.Fatalf("unknown node action: %d %+v", code, e)
		}
		if code, e := post(t, base, "/console/api/brokers/"+strconv.Itoa(int(l))+"/start", map[string]any{}, &res); code != http.StatusOK || res.Process != "running" {
			t.Fatalf("start B%d: %d %+v", l, code, e)
		}
		s.waitSnapshot(15*time.Second, "the restarted broker back in the ISR", func(s *snapshot) bool {
			p := s.partition("orders", 0)
			return s.brokerState(l) == "up" && p != nil && contains(p.ISR, l)
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
		code, e := post(t, base, "/console/api/produce", map[string]any{"topic": "orders", "partition": 0, "count": 2, "acks": "all"}, nil)
		if code != http.StatusServiceUnavailable || e.Name != "NOT_ENOUGH_REPLICAS" || e.Code != 19 {
			t.Fatalf("acks=all with %v crashed: %d %+v, want 503 NOT_ENOUGH_REPLICAS", crashed, code, e)
		}
		t.Logf("refused: %s: %s", e.Name, e.Message)
		var res produceResult
		if code, e := post(t, base, "/console/api/produce", map[string]any{"topic": "orders", "partition": 0, "count": 2, "acks": "1"}, &res); code != http.StatusOK || res.Succeeded != 2 {
			t.Fatalf("acks=1 with the ISR at the leader alone: %d %+v %+v", code, e, res)
		}
		if code, e := post(t, base, "/console/api/faults", map[string]any{"broker": crashed[0], "stall": true}, nil); code != http.StatusServiceUnavailable || e.Name != "BROKER_NOT_AVAILABLE" {
			t.Fatalf("fault on a dead broker: %d %+v", code, e)
		}
	})
}

package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
)

// The note's walk-through at cluster scale: acks=all answers only once every
// ISR member has the batch, consumers see only committed records, and every
// replica ends up with the same log.
func TestAcksAllCommitsOnEveryReplica(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.ctrl.createTopic("orders", 1, 3, map[string]string{"min.insync.replicas": "2"})
	var want []string
	for i := 0; i < 50; i++ {
		v := "m" + strconv.Itoa(i)
		off, err := c.produce("orders", 0, -1, v)
		if err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		if off != int64(i) {
			t.Fatalf("offset %d, want %d", off, i)
		}
		want = append(want, v)
		// acks=all: the batch is on every ISR member when the ack arrives.
		for id := int32(2); id <= 3; id++ {
			if _, leo := c.replicaState(id, "orders", 0); leo < int64(i+1) {
				t.Fatalf("acked offset %d but follower %d has LEO %d", i, id, leo)
			}
		}
	}
	if hw, leo := c.replicaState(1, "orders", 0); hw != 50 || leo != 50 {
		t.Fatalf("leader hw=%d leo=%d, want 50/50", hw, leo)
	}
	if got := c.consume("orders", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumer saw %v", got)
	}
	if got := c.sameLogs("orders", 0, 1, 2, 3); len(got) != 50 {
		t.Fatalf("logs hold %d records", len(got))
	}
}

// acks=1 answers after the leader's append: a consumer does not see the
// record until the followers have it (the HW), whatever acks said.
func TestConsumersReadOnlyBelowHighWatermark(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "30000"})
	c.ctrl.createTopic("t", 1, 3, nil)
	if _, err := c.produce("t", 0, -1, "a"); err != nil {
		t.Fatal(err)
	}
	// Freeze both followers: they stop fetching.
	c.net.Pause(name(2))
	c.net.Pause(name(3))
	defer c.net.Resume(name(2))
	defer c.net.Resume(name(3))
	if _, err := c.produce("t", 0, 1, "b"); err != nil {
		t.Fatal(err)
	}
	hw, leo := c.replicaState(1, "t", 0)
	if leo != 2 || hw != 1 {
		t.Fatalf("leader hw=%d leo=%d, want hw 1 below leo 2", hw, leo)
	}
	if got := c.consume("t", 0); fmt.Sprint(got) != "[a]" {
		t.Fatalf("consumer saw %v before the HW covered b", got)
	}
}

// min.insync.replicas: with the ISR down to the leader, acks=all is refused
// before anything is written (NOT_ENOUGH_REPLICAS); acks=1 still works; when
// the followers return and catch up they rejoin and acks=all works again.
func TestNotEnoughReplicasWritesNothing(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.ctrl.createTopic("minisr", 1, 3, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.produce("minisr", 0, -1, "before"); err != nil {
		t.Fatal(err)
	}
	c.crash(2)
	c.crash(3)
	c.ctrl.brokerDown(2)
	c.ctrl.brokerDown(3)
	if isr := c.ctrl.state("minisr", 0).isr; fmt.Sprint(isr) != "[1]" {
		t.Fatalf("isr %v", isr)
	}
	waitFor(t, 5*time.Second, "leader to learn the shrunk ISR", func() bool {
		_, err := c.produce("minisr", 0, -1, "refused")
		return kerr.CodeOf(err) == kerr.NotEnoughReplicas
	})
	_, leo := c.replicaState(1, "minisr", 0)
	for i := 0; i < 5; i++ {
		_, err := c.produce("minisr", 0, -1, "refused")
		if kerr.CodeOf(err) != kerr.NotEnoughReplicas {
			t.Fatalf("acks=all with ISR below min: %v", err)
		}
	}
	if _, after := c.replicaState(1, "minisr", 0); after != leo {
		t.Fatalf("refused writes changed the log: LEO %d -> %d", leo, after)
	}
	if _, err := c.produce("minisr", 0, 1, "acks1"); err != nil {
		t.Fatalf("acks=1 must still work: %v", err)
	}
	c.start(2)
	c.start(3)
	waitFor(t, 15*time.Second, "followers to rejoin the ISR", func() bool {
		return len(c.ctrl.state("minisr", 0).isr) == 3
	})
	if _, err := c.produce("minisr", 0, -1, "after"); err != nil {
		t.Fatalf("acks=all after recovery: %v", err)
	}
	got := c.sameLogs("minisr", 0, 1, 2, 3)
	if slices.Contains(got, "refused") {
		t.Fatalf("a refused record reached the log: %v", got)
	}
	if fmt.Sprint(got) != "[before acks1 after]" {
		t.Fatalf("log %v", got)
	}
}

// Playbook 2: a follower cut off from the leader leaves the ISR after
// replica.lag.time.max.ms; writes continue; healed, it catches up and
// rejoins.
func TestPartitionedFollowerLeavesAndRejoinsISR(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "1000"})
	c.ctrl.createTopic("lag", 1, 3, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.produce("lag", 0, -1, "x0"); err != nil {
		t.Fatal(err)
	}
	c.net.Partition(name(1), name(3))
	start := time.Now()
	for i := 1; i <= 5; i++ {
		// The first waits until broker 3 is shrunk out (about the lag time).
		if _, err := c.produce("lag", 0, -1, "x"+strconv.Itoa(i)); err != nil {
			t.Fatalf("produce while partitioned: %v", err)
		}
	}
	waitFor(t, 5*time.Second, "ISR to shrink to 1,2", func() bool {
		return fmt.Sprint(c.ctrl.state("lag", 0).isr) == "[1 2]"
	})
	if took := time.Since(start); took < time.Second {
		t.Fatalf("ISR shrank after %v, before replica.lag.time.max.ms", took)
	}
	c.net.Heal(name(1), name(3))
	waitFor(t, 10*time.Second, "broker 3 to rejoin", func() bool {
		return len(c.ctrl.state("lag", 0).isr) == 3
	})
	if got := c.sameLogs("lag", 0, 1, 2, 3); len(got) != 6 {
		t.Fatalf("logs %v", got)
	}
}

// Playbook 1 without the controller's etcd: the leader dies mid-stream; a
// producer with retries goes on against the new leader; nothing acknowledged
// is lost; the old leader returns, truncates as needed and rejoins; all logs
// end identical.
func TestLeaderCrashLosesNoAckedWrite(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "2000"})
	c.ctrl.createTopic("orders", 1, 3, map[string]string{"min.insync.replicas": "2"})

	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 400; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := "v" + strconv.Itoa(i)
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := c.produce("orders", 0, -1, v)
				if err == nil {
					mu.Lock()
					acked = append(acked, v)
					mu.Unlock()
					break
				}
				if !kerr.CodeOf(err).Retriable() || time.Now().After(deadline) {
					t.Errorf("produce %s: %v", v, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	waitFor(t, 10*time.Second, "some acked writes", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 40 })
	c.crash(1)
	c.ctrl.brokerDown(1)
	if l := c.ctrl.state("orders", 0).leader; l != 2 {
		t.Fatalf("new leader %d, want 2 (first live ISR member in assignment order)", l)
	}
	waitFor(t, 15*time.Second, "writes on the new leader", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 120 })
	c.start(1)
	waitFor(t, 15*time.Second, "old leader to rejoin the ISR", func() bool {
		return len(c.ctrl.state("orders", 0).isr) == 3
	})
	close(stop)
	<-done

	final := c.sameLogs("orders", 0, 1, 2, 3)
	have := map[string]bool{}
	for _, v := range final {
		have[v] = true
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range acked {
		if !have[v] {
			t.Fatalf("acknowledged record %s is missing from the log after failover", v)
		}
	}
	t.Logf("%d acknowledged, %d records in every replica's log", len(acked), len(final))
}

// truncateOnDisk cuts a stopped broker's log, as a power failure loses the
// unflushed tail.
func truncateOnDisk(t *testing.T, dir, topic string, part int32, to int64) {
	t.Helper()
	m, err := logstore.OpenManager(logstore.ManagerOptions{Dir: dir, NoBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	l, ok := m.Log(logstore.TopicPartition{Topic: topic, Partition: part})
	if !ok {
		t.Fatalf("no log for %s-%d in %s", topic, part, dir)
	}
	if _, err := l.TruncateTo(to); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// KIP-101 scenario 1: a follower restarts while its HW lags its log, and
// before it can fetch again the leader dies. Truncating to the HW (Kafka
// before 0.11, replica.truncation.mode=high-watermark) throws away an
// acknowledged record that the new leader then lacks; leader epochs keep it.
func TestKIP101AckedRecordLostOnlyWithHighWatermarkTruncation(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want string
	}{
		{"high-watermark", "[]"},
		{"leader-epoch", "[m0]"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c := newCluster(t, 2, map[string]string{
				"replica.truncation.mode":   tc.mode,
				"replica.fetch.wait.max.ms": "5000", // the follower learns the HW late
				"replica.lag.time.max.ms":   "30000",
			})
			c.ctrl.createTopic("p", 1, 2, map[string]string{"min.insync.replicas": "1"})
			if _, err := c.produce("p", 0, -1, "m0"); err != nil {
				t.Fatal(err)
			}
			// m0 is acknowledged: both replicas have it, but the follower's
			// HW has not caught up yet.
			if hw, leo := c.replicaState(2, "p", 0); hw != 0 || leo != 1 {
				t.Fatalf("precondition: follower hw=%d leo=%d, want 0/1", hw, leo)
			}
			c.net.Partition(name(1), name(2))
			c.crash(2)
			c.start(2) // a fast restart: its registration never lapsed
			// The restarted broker follows again before the leader dies;
			// under high-watermark truncation it has cut its log to its HW.
			waitFor(t, 5*time.Second, "broker 2 to follow again", func() bool {
				r, ok := c.brokers[2].Replicas().Replica(replica.TP{Topic: "p", Partition: 0})
				if !ok || r.IsLeader() {
					return false
				}
				_, leo := c.replicaState(2, "p", 0)
				return tc.mode != "high-watermark" || leo == 0
			})
			c.crash(1)
			c.ctrl.brokerDown(1)
			if l := c.ctrl.state("p", 0).leader; l != 2 {
				t.Fatalf("leader %d, want 2", l)
			}
			c.net.HealAll()
			waitFor(t, 5*time.Second, "broker 2 to lead", func() bool {
				r, ok := c.brokers[2].Replicas().Replica(replica.TP{Topic: "p", Partition: 0})
				return ok && r.IsLeader()
			})
			if got := fmt.Sprint(c.logValues(2, "p", 0)); got != tc.want {
				t.Fatalf("new leader's log %s, want %s", got, tc.want)
			}
		})
	}
}

// KIP-101 scenario 2: both replicas crash; the one that comes back first
// lost its unflushed tail, leads, and takes a new record at the same offset
// the other still holds a different record. High-watermark truncation keeps
// the old record (replicas diverge); leader epochs truncate it away.
func TestKIP101DivergenceOnlyWithHighWatermarkTruncation(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		diverged  bool
		finalOld  string
		finalLead string
	}{
		{"high-watermark", true, "[m0 m1]", "[m0 m2]"},
		{"leader-epoch", false, "[m0 m2]", "[m0 m2]"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c := newCluster(t, 2, map[string]string{"replica.truncation.mode": tc.mode})
			c.ctrl.createTopic("d", 1, 2, map[string]string{"min.insync.replicas": "1"})
			for _, v := range []string{"m0", "m1"} {
				if _, err := c.produce("d", 0, -1, v); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, 5*time.Second, "both HWs at 2", func() bool {
				h1, _ := c.replicaState(1, "d", 0)
				h2, _ := c.replicaState(2, "d", 0)
				return h1 == 2 && h2 == 2
			})
			// Broker 1 stops cleanly (its HW 2 is checkpointed); broker 2
			// takes over, then loses power and with it m1.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := c.brokers[1].Stop(ctx); err != nil {
				t.Fatal(err)
			}
			delete(c.brokers, 1)
			c.ctrl.brokerDown(1)
			c.crash(2)
			truncateOnDisk(t, c.cfgs[2].DataDir, "d", 0, 1)
			c.start(2)
			waitFor(t, 5*time.Second, "broker 2 to lead", func() bool {
				r, ok := c.brokers[2].Replicas().Replica(replica.TP{Topic: "d", Partition: 0})
				return ok && r.IsLeader()
			})
			if _, err := c.produce("d", 0, -1, "m2"); err != nil {
				t.Fatal(err)
			}
			c.start(1)
			waitFor(t, 10*time.Second, "broker 1 to rejoin the ISR", func() bool {
				return len(c.ctrl.state("d", 0).isr) == 2
			})
			waitFor(t, 10*time.Second, "both replicas at the same LEO with HW = LEO", func() bool {
				hw1, leo1 := c.replicaState(1, "d", 0)
				hw2, leo2 := c.replicaState(2, "d", 0)
				return hw1 == leo1 && hw2 == leo2 && leo1 == leo2
			})
			old, lead := fmt.Sprint(c.logValues(1, "d", 0)), fmt.Sprint(c.logValues(2, "d", 0))
			if old != tc.finalOld || lead != tc.finalLead {
				t.Fatalf("broker 1 log %s, broker 2 log %s; want %s and %s", old, lead, tc.finalOld, tc.finalLead)
			}
			if (old != lead) != tc.diverged {
				t.Fatalf("diverged=%v, want %v", old != lead, tc.diverged)
			}
		})
	}
}

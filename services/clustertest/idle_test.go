package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker"
)

// replicaView is what one broker's replica of a partition holds: its state
// machine's view and its leader-epoch cache.
type replicaView struct {
	leader        bool
	hw, leo       int64
	logStart      int64
	isr           []int32
	followerLEO   map[int32]int64 // the leader's view; -1 until a follower fetched in this epoch
	epochs        string
	firstEpoch    int32
	latestEpoch   int32
	epochsPresent bool
}

func (v replicaView) String() string {
	return fmt.Sprintf("leader %t hw %d leo %d log start %d isr %v followers %v epochs %s",
		v.leader, v.hw, v.leo, v.logStart, v.isr, v.followerLEO, v.epochs)
}

// waitReplicasAt waits until every replica of topic-p in reps holds
// exactly [at, at): log start and LEO both at, as retention leaves a log it
// emptied; it logs what each replica held if the test fails.
func (c *Cluster) waitReplicasAt(t *testing.T, topic string, p int32, reps []int32, at int64, what string) {
	t.Helper()
	var seen string
	defer func() {
		if t.Failed() {
			t.Logf("replicas last seen: %s", seen)
		}
	}()
	c.WaitFor(30*time.Second, what, func() bool {
		seen = ""
		ok := true
		for _, id := range reps {
			v, hosted := c.view(id, topic, p)
			seen += fmt.Sprintf("broker %d: %v; ", id, v)
			if !hosted || v.logStart != at || v.leo != at {
				ok = false
			}
		}
		return ok
	})
}

// view reads broker id's replica of topic-p; ok is false when the broker is
// down or does not host it.
func (c *Cluster) view(id int32, topic string, p int32) (replicaView, bool) {
	b := c.Broker(id)
	if b == nil {
		return replicaView{}, false
	}
	for _, r := range b.Replicas().Replicas() {
		if tp := r.TP(); tp.Topic != topic || tp.Partition != p {
			continue
		}
		s := r.Snapshot(time.Now())
		v := replicaView{leader: r.IsLeader(), hw: s.HighWatermark, leo: s.LogEndOffset, logStart: r.Log().LogStartOffset(),
			isr: s.ISR, followerLEO: map[int32]int64{}, firstEpoch: -1, latestEpoch: -1}
		for _, f := range s.Followers {
			v.followerLEO[f.ID] = f.LogEndOffset
		}
		entries := r.Log().EpochEntries()
		v.epochs = fmt.Sprint(entries)
		if len(entries) > 0 {
			v.epochsPresent = true
			v.firstEpoch, v.latestEpoch = entries[0].Epoch, entries[len(entries)-1].Epoch
		}
		return v, true
	}
	return replicaView{}, false
}

// runRetention applies retention to broker id's replica of topic-p below
// its HW, as the log manager's periodic check does (every 5 minutes, too
// slow for a test).
func (c *Cluster) runRetention(id int32, topic string, p int32) int {
	c.T.Helper()
	b := c.Broker(id)
	if b == nil {
		return 0
	}
	for _, r := range b.Replicas().Replicas() {
		if tp := r.TP(); tp.Topic == topic && tp.Partition == p {
			lg := r.Log().(interface{ DeleteOldSegments(hw int64) (int, error) }) // the log store's own retention pass
			n, err := lg.DeleteOldSegments(r.Snapshot(time.Now()).HighWatermark)
			if err != nil {
				c.T.Fatalf("retention on broker %d: %v", id, err)
			}
			return n
		}
	}
	return 0
}

// settled reports whether a quiet partition has caught up everywhere: the
// leader's ISR holds every replica, the leader knows every follower's LEO,
// every replica's LEO and HW equal the leader's LEO, and the leader is not
// fenced from its clients. It returns what it saw for the failure message.
func (c *Cluster) settled(topic string, p int32, replicas []int32) (bool, string) {
	leader := c.Partition(topic, p).GetLeader()
	lv, ok := c.view(leader, topic, p)
	if !ok || !lv.leader {
		return false, fmt.Sprintf("broker %d not acting as leader", leader)
	}
	seen := fmt.Sprintf("leader %d: %v", leader, lv)
	done := len(lv.isr) == len(replicas)
	// A leader fenced from its clients (for instance registered anew and
	// waiting for the controller to confirm its roles) is not live yet.
	if b := c.Broker(leader); b != nil && b.Fenced() {
		seen += " (fenced)"
		done = false
	}
	for _, id := range replicas {
		v, ok := c.view(id, topic, p)
		if id != leader {
			seen += fmt.Sprintf("; broker %d: %v", id, v)
			if lv.followerLEO[id] != lv.leo {
				done = false
			}
		}
		if !ok || v.leo != lv.leo || v.hw != lv.leo {
			done = false
		}
	}
	return done, seen
}

// waitSettled waits for settled without a single write to the partition:
// the liveness of a quiet partition.
func (c *Cluster) waitSettled(timeout time.Duration, topic string, p int32, replicas []int32) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := c.settled(topic, p, replicas)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("after %s without writes, %s-%d has not settled (full ISR, HW = LEO on every replica): %s", timeout, topic, p, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consume reads the partition from the leader as a consumer does (up to the
// HW), from offset.
func (c *Cluster) consume(topic string, p int32, offset int64) []string {
	c.T.Helper()
	leader := c.Partition(topic, p).GetLeader()
	resp, err := c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{
		Topic: topic, Partition: p, Offset: offset, CurrentLeaderEpoch: -1})
	if err != nil {
		c.T.Fatalf("consumer fetch from broker %d: %v", leader, err)
	}
	var out []string
	for _, r := range resp.GetRecords() {
		out = append(out, string(r.GetValue()))
	}
	return out
}

// A preferred election on an idle partition. Broker 2 leads epoch 1 after
// the leader's crash and writes nothing in it, so its epoch cache ends with
// (1, LEO). When the preferred replica takes over (epoch 2), broker 2's
// fetches with last fetched epoch 1 draw a divergence answer that asks it
// to truncate to its own LEO. That must still drop the empty epoch, or it
// asks again for ever, never fetches, and the new leader's HW waits for it
// while nothing is produced: consumers see nothing.
func TestPreferredElectionOnIdlePartitionSettles(t *testing.T) {
	c := Start(t, Options{})
	c.CreateTopic("idle", 1, 3, map[string]string{"min.insync.replicas": "2"})
	reps := c.Partition("idle", 0).GetReplicas()
	preferred, next := reps[0], reps[1]
	for _, v := range []string{"r0", "r1"} {
		if _, err := c.Produce(context.Background(), "idle", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	c.CrashBroker(preferred)
	c.WaitFor(10*time.Second, "the next replica to lead", func() bool {
		return c.Partition("idle", 0).GetLeader() == next && c.Leads(next, "idle", 0)
	})
	c.StartBroker(preferred)
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return len(c.Partition("idle", 0).GetIsr()) == 3
	})
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: "idle", Partition: 0}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("preferred election: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "the preferred replica to lead", func() bool {
		return c.Partition("idle", 0).GetLeader() == preferred && c.Leads(preferred, "idle", 0)
	})

	// Nothing is produced from here on.
	c.waitSettled(15*time.Second, "idle", 0, reps)
	if v, _ := c.view(next, "idle", 0); v.latestEpoch == 1 {
		t.Fatalf("broker %d still holds the empty epoch 1 it led: %s", next, v.epochs)
	}
	if got := c.consume("idle", 0, 0); !slices.Equal(got, []string{"r0", "r1"}) {
		t.Fatalf("consumer read %v, want [r0 r1]", got)
	}
}

// Time retention on an idle topic after a leadership change. The new
// leader's epoch cache is trimmed from the start to its own epoch, which
// no follower has (nothing was written in it); the followers' last epoch is
// older than the leader's whole cache. Kafka's endOffsetFor answers such an
// epoch with the start of the leader's first one, and the followers fetch
// on. Refusing it (OFFSET_OUT_OF_RANGE, "resume at the LEO") left them
// asking for good: a restarted follower (its HW checkpointed at its LEO, so
// falling back to the HW cuts nothing) never rejoined the ISR, and with min
// ISR 2 every acks=all write was refused.
func TestRetentionOnIdleTopicKeepsFollowersInSync(t *testing.T) {
	c := Start(t, Options{})
	c.CreateTopic("ret", 1, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "1000"})
	reps := c.Partition("ret", 0).GetReplicas()
	old, leader, follower := reps[0], reps[1], reps[2]
	for _, v := range []string{"r0", "r1"} {
		if _, err := c.Produce(context.Background(), "ret", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	c.waitSettled(10*time.Second, "ret", 0, reps)
	// A leadership change without writes: the leader's controlled shutdown.
	if err := c.StopBroker(old); err != nil {
		t.Fatalf("stop broker %d: %v", old, err)
	}
	c.WaitFor(10*time.Second, "a new leader", func() bool {
		return c.Partition("ret", 0).GetLeader() == leader && c.Leads(leader, "ret", 0)
	})
	// Retention deletes every segment once the records are older than
	// retention.ms; the leader's cache keeps only its own epoch.
	var lv replicaView
	defer func() {
		if t.Failed() {
			t.Logf("leader %d's replica after retention: %v", leader, lv)
		}
	}()
	c.WaitFor(10*time.Second, "retention to delete the leader's records", func() bool {
		c.runRetention(leader, "ret", 0)
		c.runRetention(follower, "ret", 0)
		lv, _ = c.view(leader, "ret", 0)
		return lv.logStart == 2
	})
	fv, _ := c.view(follower, "ret", 0)
	if !lv.epochsPresent || !fv.epochsPresent || fv.latestEpoch >= lv.firstEpoch {
		t.Fatalf("setup: want the follower's last epoch older than the leader's whole cache; leader %s, follower %s", lv.epochs, fv.epochs)
	}

	// Quiet: both followers restart with their old epoch and must rejoin.
	c.StartBroker(old)
	if err := c.StopBroker(follower); err != nil {
		t.Fatalf("stop broker %d: %v", follower, err)
	}
	c.StartBroker(follower)
	c.waitSettled(20*time.Second, "ret", 0, reps)
	if _, err := c.Produce(context.Background(), "ret", 0, -1, "r2"); err != nil {
		t.Fatalf("acks=all produce after retention: %v", err)
	}
	if got := c.SameLogs("ret", 0, reps...); !slices.Equal(got, []string{"r2"}) {
		t.Fatalf("replicas hold %v, want [r2] (r0, r1 deleted by retention)", got)
	}
	if got := c.consume("ret", 0, 2); !slices.Equal(got, []string{"r2"}) {
		t.Fatalf("consumer read %v, want [r2]", got)
	}
}

// followerFetches reads, from broker id's /metrics, how many follower
// fetches it has served as a leader.
func (c *Cluster) followerFetches(id int32) int64 {
	return int64(c.metric(id, `tidemark_broker_fetch_latency_seconds_count{kind="follower"}`))
}

// metric reads one sample from broker id's /metrics (its metrics listener
// must be on), by its name and labels as printed; 0 when absent.
func (c *Cluster) metric(id int32, name string) float64 {
	c.T.Helper()
	resp, err := http.Get("http://" + c.Broker(id).MetricsAddr() + "/metrics")
	if err != nil {
		c.T.Fatalf("metrics of broker %d: %v", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.T.Fatalf("metrics of broker %d: %v", id, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				c.T.Fatalf("metrics of broker %d: %q: %v", id, line, err)
			}
			return n
		}
	}
	return 0
}

// A follower whose truncation cannot make progress gets the same divergence
// answer on every fetch. It must back off between them, not ask again at
// once: spinning burns both brokers' CPU, and every such answer also ends
// the leader's long poll for all the partitions of that fetch. Broker 2
// leads epoch 1 without writing, then its log fails (no truncation can
// succeed) before the preferred replica takes over.
func TestFollowerWithoutTruncationProgressBacksOff(t *testing.T) {
	c := Start(t, Options{Adjust: func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" }})
	c.CreateTopic("stuck", 1, 3, map[string]string{"min.insync.replicas": "2"})
	reps := c.Partition("stuck", 0).GetReplicas()
	preferred, next := reps[0], reps[1]
	for _, v := range []string{"r0", "r1"} {
		if _, err := c.Produce(context.Background(), "stuck", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	c.CrashBroker(preferred)
	c.WaitFor(10*time.Second, "the next replica to lead", func() bool {
		return c.Partition("stuck", 0).GetLeader() == next && c.Leads(next, "stuck", 0)
	})
	c.StartBroker(preferred)
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return len(c.Partition("stuck", 0).GetIsr()) == 3
	})
	for _, r := range c.Broker(next).Replicas().Replicas() {
		if r.TP().Topic == "stuck" {
			r.Log().(interface{ Abandon() }).Abandon() // every later write, truncations included, fails
		}
	}
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: "stuck", Partition: 0}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("preferred election: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "the preferred replica to lead", func() bool {
		return c.Partition("stuck", 0).GetLeader() == preferred && c.Leads(preferred, "stuck", 0)
	})
	time.Sleep(time.Second) // past the first answers, which come at once
	const window = 3 * time.Second
	before := c.followerFetches(preferred)
	time.Sleep(window)
	n := c.followerFetches(preferred) - before
	// The healthy follower long-polls (500 ms), the stuck one waits a
	// backoff (1 s) between answers: about ten fetches. A spinning
	// follower makes thousands.
	if n > 40 {
		t.Fatalf("leader served %d follower fetches in %s: the stuck follower does not back off", n, window)
	}
	t.Logf("leader served %d follower fetches in %s", n, window)
}

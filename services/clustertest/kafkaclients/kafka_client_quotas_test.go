package kafkaclients

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
)

// throttleHook counts the throttles Kafka answers reported, by broker.
type throttleHook struct {
	mu sync.Mutex
	n  map[int32]int
}

func (h *throttleHook) OnBrokerThrottle(meta kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[meta.NodeID]++
}

func (h *throttleHook) count(id int32) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[id]
}

// quotaProducer is a producer sending as clientID, each record to the
// partition it names, counting the throttles it is told of.
type quotaProducer struct {
	cl   *kgo.Client
	hook *throttleHook
}

func newQuotaProducer(c *clustertest.Cluster, clientID string) *quotaProducer {
	h := &throttleHook{n: map[int32]int{}}
	return &quotaProducer{hook: h, cl: c.KafkaClient(kgo.ClientID(clientID), kgo.WithHooks(h),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0))}
}

// throttledOn sends one 2,000-byte record to partition p, led by broker
// id, and says whether the answer reported a throttle. Under a
// 1,000 B/s quota measured over at least one second, such a record is
// always over it.
func (q *quotaProducer) throttledOn(t *testing.T, topic string, p, id int32) bool {
	t.Helper()
	before := q.hook.count(id)
	r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(strings.Repeat("q", 2000))}
	if err := q.cl.ProduceSync(clustertest.CtxFor(t, 20*time.Second), r).FirstErr(); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, p, err)
	}
	return q.hook.count(id) > before
}

func quotaValue(vs kadm.ClientQuotaValues, key string) float64 {
	for _, v := range vs {
		if v.Key == key {
			return v.Value
		}
	}
	return 0
}

func quotaEntry(clientID string, rate float64, remove bool) kadm.AlterClientQuotaEntry {
	name := clientID
	return kadm.AlterClientQuotaEntry{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate, Remove: remove}},
	}
}

func alterQuotas(t *testing.T, adm *kadm.Client, entries ...kadm.AlterClientQuotaEntry) {
	t.Helper()
	res, err := adm.AlterClientQuotas(clustertest.CtxFor(t, 20*time.Second), entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
}

// A producer_byte_rate set for a client id through Kafka's
// AlterClientQuotas throttles that client id on every broker, and no
// other, without a restart; removed, it throttles nobody; it outlives a
// controller failover; a broker restarted while quotas changed enforces
// the new ones from its first request.
func TestKafkaClientQuotaEntitiesFollowedByEveryBroker(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: throttled answers are held back a second each")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Controllers: 2, Kafka: true, BrokerSettings: map[string]string{
		"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := kadm.NewClient(c.KafkaClient(kgo.ClientID("admin")))
	c.KafkaCreate(adm, "cq", 3, 1, nil)
	leaderOf := map[int32]int32{} // broker -> the partition it leads
	for p := range int32(3) {
		leaderOf[c.Partition("cq", p).GetLeader()] = p
	}
	if len(leaderOf) != 3 {
		t.Fatalf("partition leaders %v: want one partition on each broker", leaderOf)
	}
	slow, fast := newQuotaProducer(c, "slow"), newQuotaProducer(c, "fast")
	// everyBroker waits until cond holds for each broker's partition.
	everyBroker := func(what string, q *quotaProducer, want bool) {
		t.Helper()
		for id, p := range leaderOf {
			c.WaitFor(20*time.Second, fmt.Sprintf("broker %d: %s", id, what), func() bool { return q.throttledOn(t, "cq", p, id) == want })
		}
	}
	for id, p := range leaderOf {
		if slow.throttledOn(t, "cq", p, id) {
			t.Fatalf("broker %d throttled a client without a quota", id)
		}
	}

	alterQuotas(t, adm, quotaEntry("slow", 1000, false))
	described, err := adm.DescribeClientQuotas(clustertest.CtxFor(t, 10*time.Second), true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: kmsg.StringPtr("slow"), MatchType: 0}})
	if err != nil || len(described) != 1 || quotaValue(described[0].Values, "producer_byte_rate") != 1000 {
		t.Fatalf("described %+v (%v)", described, err)
	}
	everyBroker("the client id with a quota is throttled", slow, true)
	for id, p := range leaderOf {
		if fast.throttledOn(t, "cq", p, id) {
			t.Errorf("broker %d throttled another client id", id)
		}
	}

	// The rate the quota holds a steady producer to, loosely: 40 records
	// of 4,000 B at 20,000 B/s take several seconds, not a burst.
	alterQuotas(t, adm, quotaEntry("slow", 20_000, false))
	everyBrokerRate := func() {
		id, p := int32(1), leaderOf[1]
		start := time.Now()
		for range 40 {
			r := &kgo.Record{Topic: "cq", Partition: p, Value: []byte(strings.Repeat("r", 4000))}
			if err := slow.cl.ProduceSync(clustertest.CtxFor(t, 20*time.Second), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		rate := 160_000 / time.Since(start).Seconds()
		t.Logf("broker %d: 160,000 B at %.0f B/s under a 20,000 B/s quota", id, rate)
		if rate > 3*20_000 {
			t.Errorf("broker %d: a producer under a 20,000 B/s quota ran at %.0f B/s", id, rate)
		}
	}
	everyBrokerRate()

	alterQuotas(t, adm, quotaEntry("slow", 0, true))
	everyBroker("the quota removed, nobody is throttled", slow, false)

	// The active controller goes; the next one has the entities and
	// stores new ones.
	alterQuotas(t, adm, quotaEntry("kept", 1000, false))
	active, _ := c.ActiveController()
	c.StopController(active)
	c.WaitFor(15*time.Second, "another controller active", func() bool {
		id, _ := c.ActiveController()
		return id != -1 && id != active
	})
	c.WaitFor(15*time.Second, "the entities described by the new controller", func() bool {
		d, err := adm.DescribeClientQuotas(clustertest.CtxFor(t, 5*time.Second), false, nil)
		return err == nil && len(d) == 1 && quotaValue(d[0].Values, "producer_byte_rate") == 1000
	})
	alterQuotas(t, adm, quotaEntry("slow", 1000, false))
	everyBroker("throttled again after the failover", slow, true)

	// Broker 3 is down while the quotas change; back, it enforces them at
	// once: it loads the entities before it registers.
	if err := c.StopBroker(3); err != nil {
		t.Fatal(err)
	}
	alterQuotas(t, adm, quotaEntry("slow", 0, true), quotaEntry("late", 1000, false))
	c.StartBroker(3)
	c.WaitBrokerAlive(3)
	p3 := leaderOf[3]
	c.WaitFor(15*time.Second, "broker 3 leads its partition again", func() bool { return c.Leads(3, "cq", p3) })
	late := newQuotaProducer(c, "late")
	if !late.throttledOn(t, "cq", p3, 3) {
		t.Error("broker 3, restarted while a quota was set, did not throttle by it")
	}
	if slow.throttledOn(t, "cq", p3, 3) {
		t.Error("broker 3, restarted while a quota was removed, still throttled by it")
	}
}

// A consumer_byte_rate on the entity of the plaintext principal and a
// client id (user ANONYMOUS, client-id reader) throttles that client's
// fetches; the same user with another client id falls through to the
// user's own entity, a higher rate, and is not throttled.
func TestKafkaConsumerQuotaOfUserAndClientEntity(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := kadm.NewClient(c.KafkaClient(kgo.ClientID("admin")))
	c.KafkaCreate(adm, "cf", 1, 1, nil)
	prod := c.KafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := prod.ProduceSync(clustertest.CtxFor(t, 30*time.Second), &kgo.Record{Topic: "cf", Value: []byte(strings.Repeat("f", 6000))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	user, reader := "ANONYMOUS", "reader"
	res, err := adm.AlterClientQuotas(clustertest.CtxFor(t, 20*time.Second), []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}, {Type: "client-id", Name: &reader}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1000}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1 << 30}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	fetch := func(clientID string) int32 {
		t.Helper()
		cl := c.KafkaClient(kgo.ClientID(clientID), clustertest.FetchByName())
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 50<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "cf"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, fp)
		req.Topics = []kmsg.FetchRequestTopic{rt}
		resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 30*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse).ThrottleMillis
	}
	c.WaitFor(15*time.Second, "the reader's fetch throttled by its user+client entity", func() bool { return fetch(reader) > 0 })
	if ms := fetch("other"); ms != 0 {
		t.Fatalf("another client id of the same user: throttle_time_ms %d, want 0 (its user's entity allows 1 GiB/s)", ms)
	}
}

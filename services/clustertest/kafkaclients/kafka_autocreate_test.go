package kafkaclients

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/kerr"
)

// Kafka's auto.create.topics.enable (on by default) over the listener: a
// kgo producer allowing topic creation writes to a topic nobody created,
// which the controller creates with its num.partitions and
// default.replication.factor; a Metadata request that does not allow it,
// or names an invalid topic, or a Produce to a topic that does not exist,
// creates nothing. Two producers on different brokers starting at once
// make one topic and both write to it. Before, the producer failed with
// UNKNOWN_TOPIC_OR_PARTITION until its delivery timeout.
func TestKafkaMetadataCreatesTopicsAutomatically(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, AdjustController: func(cfg *controller.Config) {
		cfg.NumPartitions, cfg.DefaultReplicationFactor = 3, 2
	}})
	describe := func(topic string) *adminv1.TopicDescription {
		resp, err := c.Admin().DescribeTopics(context.Background(), &adminv1.DescribeTopicsRequest{Topics: []string{topic}})
		if err != nil || len(resp.GetTopics()) == 0 || resp.GetTopics()[0].GetErrorCode() != 0 {
			return nil
		}
		return resp.GetTopics()[0]
	}
	checkShape := func(topic string) {
		t.Helper()
		d := describe(topic)
		if d == nil || len(d.GetPartitions()) != 3 {
			t.Fatalf("%s: %v, want 3 partitions (num.partitions)", topic, d)
		}
		for _, p := range d.GetPartitions() {
			if len(p.GetReplicas()) != 2 {
				t.Fatalf("%s-%d: replicas %v, want 2 (default.replication.factor)", topic, p.GetPartition(), p.GetReplicas())
			}
		}
	}

	cl := c.KafkaClient(kgo.AllowAutoTopicCreation())
	clustertest.ProduceSync(t, cl, "auto-orders", "a")
	checkShape("auto-orders")

	plain := c.KafkaClient()
	meta := func(topic string, allow bool) kerr.Code {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = allow
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(clustertest.CtxFor(t, 10*time.Second), plain)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("metadata %s: %v %+v", topic, err, resp)
		}
		return kerr.Code(resp.Topics[0].ErrorCode)
	}
	if code := meta("not-allowed", false); code != kerr.UnknownTopicOrPartition {
		t.Errorf("allow_auto_topic_creation=false: %s, want UNKNOWN_TOPIC_OR_PARTITION", code)
	}
	if code := meta("bad name", true); code != kerr.InvalidTopicException {
		t.Errorf("an invalid name: %s, want INVALID_TOPIC_EXCEPTION", code)
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "produced-to"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batchOf(1)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	presp, err := pr.RequestWith(clustertest.CtxFor(t, 10*time.Second), plain)
	if err != nil || kerr.Code(presp.Topics[0].Partitions[0].ErrorCode) != kerr.UnknownTopicOrPartition {
		t.Errorf("produce to a topic that does not exist: %v %+v, want UNKNOWN_TOPIC_OR_PARTITION", err, presp)
	}
	for _, topic := range []string{"not-allowed", "produced-to"} {
		if d := describe(topic); d != nil {
			t.Errorf("%s was created: %v", topic, d)
		}
	}

	// Two producers, each seeded with another broker, at once.
	addrs := c.KafkaAddrs()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		one, err := kgo.NewClient(kgo.SeedBrokers(addrs[i]), kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(one.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = one.ProduceSync(clustertest.CtxFor(t, 30*time.Second), &kgo.Record{Topic: "auto-race", Value: []byte("v")}).FirstErr()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("producer %d: %v", i, err)
		}
	}
	checkShape("auto-race")
	var total int64
	for p := range int32(3) {
		leader := c.Partition("auto-race", p).GetLeader()
		if b := c.Broker(leader); b != nil {
			if _, leo, ok := b.ReplicaOffsets("auto-race", p); ok {
				total += leo
			}
		}
	}
	if total != 2 {
		t.Fatalf("auto-race holds %d records across its partitions, want both producers' 2 in one topic", total)
	}
}

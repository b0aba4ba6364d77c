package kafkaclients

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
)

// KIP-392 through the Kafka listener: a consumer that names its rack is
// pointed by the leader at the in-sync follower in that rack, and kgo,
// following the answer, reads everything from there.
func TestKafkaFetchFromFollowerInTheConsumersRack(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, Racks: []string{"rack-a", "rack-b", "rack-c"}})
	cl := c.KafkaClient(clustertest.FetchByName())
	c.KafkaCreate(kadm.NewClient(cl), "racks", 1, 3, nil)
	clustertest.ProduceSync(t, cl, "racks", "r0", "r1", "r2")
	leader := c.Leader("racks", 0)
	follower := leader%3 + 1
	rack := []string{"rack-a", "rack-b", "rack-c"}[follower-1]

	ask := func() int32 {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(11)
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch, req.Rack = -1, 0, 1<<20, -1, rack
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch = 0, 0, 1<<20, -1
		tp := kmsg.NewFetchRequestTopic()
		tp.Topic, tp.Partitions = "racks", []kmsg.FetchRequestTopicPartition{p}
		req.Topics = []kmsg.FetchRequestTopic{tp}
		resp, err := cl.Broker(int(leader)).Request(clustertest.CtxFor(t, 10*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		part := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			t.Fatalf("fetch error %d", part.ErrorCode)
		}
		return part.PreferredReadReplica
	}
	c.WaitFor(20*time.Second, "the leader to point a "+rack+" consumer at its follower there", func() bool { return ask() == follower })

	cons := c.KafkaClient(kgo.ConsumeTopics("racks"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Rack(rack))
	if got := consumeAll(t, cons, 3)[0]; len(got) != 3 || got[2] != "r2" {
		t.Fatalf("read %q from the follower", got)
	}
}

// A consumer's long poll (max_wait, min_bytes) parks on an empty partition
// and is answered by the next append, not by the end of its wait: the
// request allows 60 s, its context 30 s.
func TestKafkaLongPollAnsweredByTheNextAppend(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient(clustertest.FetchByName())
	c.KafkaCreate(kadm.NewClient(cl), "poll", 2, 3, nil)
	leader := c.Leader("poll", 1)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 60000, 1, 1<<20, -1
	tp := kmsg.NewFetchRequestTopic()
	tp.Topic = "poll"
	for p := int32(0); p < 2; p++ {
		if c.Partition("poll", p).GetLeader() != leader {
			continue
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 0, 1<<20, -1
		tp.Partitions = append(tp.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{tp}
	type answer struct {
		resp kmsg.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := cl.Broker(int(leader)).Request(clustertest.CtxFor(t, 30*time.Second), req)
		got <- answer{resp, err}
	}()
	prod := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(clustertest.CtxFor(t, 20*time.Second), &kgo.Record{Topic: "poll", Partition: 1, Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatalf("long poll: %v (not answered by the append)", a.err)
	}
	var total int
	for _, p := range a.resp.(*kmsg.FetchResponse).Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
		total += len(p.RecordBatches)
	}
	if total == 0 {
		t.Fatal("the long poll ended without the appended record")
	}
}

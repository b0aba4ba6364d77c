package kafkaclients

import (
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
)

// A CreateTopics answered by a broker is answered once that broker's own
// metadata has the topic led (Kafka's broker waits the same way, within
// timeout_ms): a client asking the same broker next finds the topic, and
// the answer carries its id. Broker 1 hosts no replica and hears of the
// topic late (its controller link delayed); past timeout_ms the answer is
// REQUEST_TIMED_OUT, the topic created all the same.
func TestKafkaCreateTopicsAnswersOnceTheBrokerKnowsTheTopic(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient()
	ctrl, _ := c.ActiveController()
	c.Net.Delay(clustertest.ControllerName(ctrl), clustertest.BrokerName(1), time.Second)
	defer c.Net.Delay(clustertest.ControllerName(ctrl), clustertest.BrokerName(1), 0)
	b1 := cl.Broker(1)

	create := func(topic string, timeoutMs int32) *kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = timeoutMs
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = 0, []int32{2, 3}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(clustertest.CtxFor(t, 20*time.Second), b1)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("create %s through broker 1: %v %+v", topic, err, resp)
		}
		return &resp.Topics[0]
	}

	got := create("fresh", 10000)
	if err := fkerr.ErrorForCode(got.ErrorCode); err != nil || got.TopicID == [16]byte{} {
		t.Fatalf("create answered %v, topic id %x: want success with the topic's id", err, got.TopicID)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("fresh")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(clustertest.CtxFor(t, 10*time.Second), b1)
	if err != nil || len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 ||
		len(mresp.Topics[0].Partitions) != 1 || mresp.Topics[0].Partitions[0].Leader != 2 {
		t.Fatalf("broker 1's metadata right after the create: %v %+v", err, mresp)
	}

	c.Net.Delay(clustertest.ControllerName(ctrl), clustertest.BrokerName(1), 3*time.Second)
	late := create("late", 300)
	if late.ErrorCode != fkerr.RequestTimedOut.Code {
		t.Fatalf("create with timeout_ms 300 while broker 1 hears 3 s late answered %v", fkerr.ErrorForCode(late.ErrorCode))
	}
	c.WaitFor(20*time.Second, "topic late led by broker 2", func() bool { return c.Leads(2, "late", 0) })
}

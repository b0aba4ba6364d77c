package kafkaclients

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// rawKafka is one Kafka connection spoken by hand, to see what a client
// sees: answers, and whether the broker closed the connection.
type rawKafka struct {
	t  *testing.T
	nc net.Conn
}

func dialKafka(t *testing.T, addr string) *rawKafka {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	return &rawKafka{t: t, nc: nc}
}

// send writes req with correlation id corr (client id "test").
func (k *rawKafka) send(req kmsg.Request, corr int32) {
	k.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := k.nc.Write(b); err != nil {
		k.t.Fatal(err)
	}
}

// next reads the next answer's body (after its correlation id); err is
// set when the broker closed the connection instead.
func (k *rawKafka) next() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(k.nc, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(k.nc, body); err != nil {
		return nil, err
	}
	return body[4:], nil
}

func batchOf(n int) []byte {
	var b recordbatch.Builder
	for i := range n {
		b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: fmt.Appendf(nil, "v%d", i)})
	}
	return b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
}

// What a Kafka client cannot be told in an answer, it is told as Kafka
// tells it, by a closed connection: an acks=0 write that failed (sent to a
// broker that does not lead the partition), so the producer refreshes its
// metadata instead of losing every record until it expires; and an
// all-topics Metadata on a fenced broker, which answered a list with no
// topic and no error (every topic gone, to a pattern subscriber).
// produce.max.records.per.request applies at this door too.
func TestKafkaDoorClosesWhatItCannotAnswerAndLimitsRecords(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 2, Controllers: 1, Kafka: true,
		BrokerSettings: map[string]string{"produce.max.records.per.request": "5"}})
	cl := c.KafkaClient()
	c.KafkaCreate(kadm.NewClient(cl), "door", 1, 1, nil)
	leader := c.Partition("door", 0).GetLeader()
	other := 3 - leader
	produce := func(acks int16, records int) *kmsg.ProduceRequest {
		pr := kmsg.NewPtrProduceRequest()
		pr.SetVersion(7)
		pr.Acks, pr.TimeoutMillis = acks, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "door"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = 0, batchOf(records)
		pt.Partitions = []kmsg.ProduceRequestTopicPartition{pp}
		pr.Topics = []kmsg.ProduceRequestTopic{pt}
		return pr
	}
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.SetVersion(0)

	// acks=0 to the leader: no answer, the connection stays.
	k := dialKafka(t, c.KafkaAddrs()[leader-1])
	k.send(produce(0, 1), 1)
	k.send(apiVersions, 2)
	if _, err := k.next(); err != nil {
		t.Fatalf("after an acks=0 write to the leader the connection was closed: %v", err)
	}
	// acks=0 to the other broker: closed.
	k = dialKafka(t, c.KafkaAddrs()[other-1])
	k.send(produce(0, 1), 1)
	k.send(apiVersions, 2)
	if body, err := k.next(); err == nil {
		t.Fatalf("an acks=0 write to broker %d, which does not lead the partition, left the connection open (next answer %d bytes)", other, len(body))
	}

	// produce.max.records.per.request.
	resp, err := cl.Broker(int(leader)).Request(clustertest.CtxFor(t, 10*time.Second), produce(1, 50))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != int16(kerr.RecordListTooLarge) {
		t.Fatalf("a batch of 50 records with produce.max.records.per.request=5: error %d, want RECORD_LIST_TOO_LARGE", code)
	}

	// The other broker is fenced: cut from etcd and the controller.
	ttl := c.BrokerConfig(other).SessionTimeout
	c.EtcdLink(other).Pause()
	c.Net.Partition(clustertest.BrokerName(other), clustertest.ControllerName(1))
	c.WaitFor(6*ttl, "the broker fenced", func() bool { return c.Broker(other).Fenced() })
	name := "door"
	c.WaitFor(20*time.Second, "a named-topic Metadata refused by the fenced broker", func() bool {
		k := dialKafka(t, c.KafkaAddrs()[other-1])
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(7)
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
		k.send(req, 1)
		body, err := k.next()
		if err != nil {
			return false
		}
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(7)
		return resp.ReadFrom(body) == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != 0
	})
	k = dialKafka(t, c.KafkaAddrs()[other-1])
	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(7)
	k.send(all, 1)
	if body, err := k.next(); err == nil {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(7)
		_ = resp.ReadFrom(body)
		t.Fatalf("the fenced broker answered an all-topics Metadata with %d topics and %d brokers; want the connection closed", len(resp.Topics), len(resp.Brokers))
	}
}

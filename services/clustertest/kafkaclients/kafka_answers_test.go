package kafkaclients

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func produceRequest(version int16, topic string, records []byte) *kmsg.ProduceRequest {
	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(version)
	pr.Acks, pr.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 0, records
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{pp}
	pr.Topics = []kmsg.ProduceRequestTopic{pt}
	return pr
}

// Kafka marks __consumer_offsets internal in Metadata (is_internal); clients
// rely on it: kgo's regex consumers and kadm's FilterInternal skip internal
// topics, Java's consumer honours exclude.internal.topics with it.
func TestMetadataMarksTheOffsetsTopicInternal(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Kafka: true})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "plain", 1, 1, nil)
	c.WaitFor(20*time.Second, "__consumer_offsets created", func() bool {
		_ = adm.FindGroupCoordinators(clustertest.CtxFor(t, 5*time.Second), "g")
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(9)
		resp, err := req.RequestWith(clustertest.CtxFor(t, 5*time.Second), cl)
		if err != nil {
			return false
		}
		for _, tm := range resp.Topics {
			if tm.Topic != nil && *tm.Topic == "__consumer_offsets" && len(tm.Partitions) > 0 {
				if !tm.IsInternal {
					t.Fatalf("Metadata v9 lists __consumer_offsets with is_internal=false")
				}
				return true
			}
		}
		return false
	})
}

// KIP-951 (Produce v10+): a NOT_LEADER_OR_FOLLOWER answer names the current
// leader (current_leader) and its endpoint (node_endpoints), so the
// producer redirects at once, without a metadata round trip.
func TestProduceNotLeaderNamesTheLeader(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 2, Kafka: true})
	cl := c.KafkaClient()
	c.KafkaCreate(kadm.NewClient(cl), "moved", 1, 2, nil)
	part := c.Partition("moved", 0)
	leader, other := part.GetLeader(), 3-part.GetLeader()
	resp, err := cl.Broker(int(other)).Request(clustertest.CtxFor(t, 10*time.Second), produceRequest(10, "moved", batchOf(1)))
	if err != nil {
		t.Fatal(err)
	}
	rp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != int16(kerr.NotLeaderOrFollower) {
		t.Fatalf("produce to the follower: error %d, want NOT_LEADER_OR_FOLLOWER", rp.ErrorCode)
	}
	eps := resp.(*kmsg.ProduceResponse).Brokers
	if rp.CurrentLeader.LeaderID != leader || rp.CurrentLeader.LeaderEpoch != part.GetLeaderEpoch() ||
		!slices.ContainsFunc(eps, func(b kmsg.ProduceResponseBroker) bool { return b.NodeID == leader }) {
		t.Fatalf("NOT_LEADER_OR_FOLLOWER at v10: current_leader %+v, node_endpoints %+v; want leader %d epoch %d with its endpoint",
			rp.CurrentLeader, eps, leader, part.GetLeaderEpoch())
	}
}

// Produce v3+ takes only magic 2 batches: Kafka answers INVALID_RECORD (87,
// not retriable) for an older magic, never CORRUPT_MESSAGE, which clients
// retry until their delivery timeout.
func TestProduceOldMagicIsInvalidRecord(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Kafka: true})
	cl := c.KafkaClient()
	c.KafkaCreate(kadm.NewClient(cl), "magic", 1, 1, nil)
	// A magic 1 message set of one message: offset, size, crc, then
	// magic, attributes, timestamp, key (null) and value.
	msg := []byte{1, 0}
	msg = binary.BigEndian.AppendUint64(msg, uint64(time.Now().UnixMilli()))
	msg = binary.BigEndian.AppendUint32(msg, 0xffffffff)
	msg = binary.BigEndian.AppendUint32(msg, 1)
	msg = append(msg, 'v')
	body := binary.BigEndian.AppendUint64(nil, 0)
	body = binary.BigEndian.AppendUint32(body, uint32(4+len(msg)))
	body = binary.BigEndian.AppendUint32(body, crc32.ChecksumIEEE(msg))
	body = append(body, msg...)
	resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 10*time.Second), produceRequest(7, "magic", body))
	if err != nil {
		t.Fatal(err)
	}
	rp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != int16(kerr.InvalidRecord) {
		t.Fatalf("a magic 1 message set at Produce v7: error %d (%s), want INVALID_RECORD (87)", rp.ErrorCode, kerr.Code(rp.ErrorCode))
	}
}

// Kafka refuses a zstd batch at Produce < 7 with UNSUPPORTED_COMPRESSION_TYPE
// (76, KIP-110: ProduceRequest.validateRecords).
func TestProduceBeforeV7RefusesZstd(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Kafka: true})
	cl := c.KafkaClient()
	c.KafkaCreate(kadm.NewClient(cl), "zstd", 1, 1, nil)
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("z")})
	batch, err := b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence).Compressed(recordbatch.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	k := dialKafka(t, c.KafkaAddrs()[0]) // by hand: kgo would raise the version to the broker's max
	k.send(produceRequest(6, "zstd", batch), 1)
	body, err := k.next()
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(6)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	rp := resp.Topics[0].Partitions[0]
	if rp.ErrorCode != 76 {
		t.Fatalf("a zstd batch at Produce v6: error %d, base offset %d; want UNSUPPORTED_COMPRESSION_TYPE (76)", rp.ErrorCode, rp.BaseOffset)
	}
}

// Kafka answers a batch the producer state refuses (UNKNOWN_PRODUCER_ID,
// OUT_OF_ORDER_SEQUENCE_NUMBER) with the partition's log start
// (ReplicaManager.processFailedRecord): an idempotent producer compares it
// with its last acknowledged offset to tell state dropped with deleted
// records from a lost write (KIP-360). Kafka's Java producer resends the
// same batch, sequence unchanged, while it reads -1 there, until
// delivery.timeout.ms fails it; kgo reports data loss.
func TestProduceRefusedByProducerStateCarriesLogStartOffset(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Kafka: true})
	cl := c.KafkaClient()
	c.KafkaCreate(kadm.NewClient(cl), "idem", 1, 1, nil)
	send := func(records []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 10*time.Second), produceRequest(9, "idem", records))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	idem := func(seq int32) []byte {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("i")})
		return b.Build(4242, 0, seq)
	}
	if rp := send(batchOf(3)); rp.ErrorCode != 0 {
		t.Fatalf("plain batch: error %d", rp.ErrorCode)
	}
	type startable interface {
		AdvanceLogStartOffset(offset, hw int64) error
		LogStartOffset() int64
	}
	var lg startable
	for _, r := range c.Broker(1).Replicas().Replicas() {
		if r.TP().Topic == "idem" {
			lg = r.Log().(startable)
		}
	}
	if lg == nil {
		t.Fatal("broker 1 does not host the partition")
	}
	// As DeleteRecords would: the log starts at 2 now.
	if err := lg.AdvanceLogStartOffset(2, 3); err != nil {
		t.Fatal(err)
	}
	check := func(rp kmsg.ProduceResponseTopicPartition, want kerr.Code) {
		t.Helper()
		if rp.ErrorCode != int16(want) || rp.LogStartOffset != lg.LogStartOffset() {
			t.Fatalf("error %s, log_start_offset %d; want %s with the log start %d",
				kerr.Code(rp.ErrorCode), rp.LogStartOffset, want, lg.LogStartOffset())
		}
	}
	check(send(idem(7)), kerr.UnknownProducerID)
	if rp := send(idem(0)); rp.ErrorCode != 0 {
		t.Fatalf("first idempotent batch: error %d", rp.ErrorCode)
	}
	check(send(idem(5)), kerr.OutOfOrderSequenceNumber)
}

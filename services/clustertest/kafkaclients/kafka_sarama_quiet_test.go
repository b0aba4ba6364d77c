package kafkaclients

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
)

// A sarama group (two members, auto commit) and a sarama idempotent
// acks=all producer left idle while their partition's leader, broker 1, is
// stopped by a controlled shutdown and later started again (and the group's
// coordinator with it where broker 1 held it): each write afterwards is
// acknowledged at the next offset of its partition, the group reads each
// record once, commits the end of every partition, and holds each
// partition once.
func TestSaramaIdleAcrossAControlledShutdownOfItsLeader(t *testing.T) {
	testenv.SkipIfShort(t, "sarama clients across a controlled shutdown")
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
	const topic = "squiet"
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2, 3}, {1, 3, 2}}, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 30
	cfg.Producer.Retry.Backoff = 250 * time.Millisecond
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	a, stopA := saramaMember(t, c, "sarama-quiet", topic)
	defer stopA()
	b, stopB := saramaMember(t, c, "sarama-quiet", topic)
	defer stopB()

	want := map[int32][]string{}
	var all []string
	check := func(what string) {
		t.Helper()
		time.Sleep(3 * time.Second) // idle
		for p := range int32(2) {
			v := fmt.Sprintf("p%d-%d", p, len(want[p]))
			gotP, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(v)})
			if err != nil || gotP != p || off != int64(len(want[p])) {
				t.Fatalf("%s: send %s: partition %d offset %d, %v; want offset %d", what, v, gotP, off, err, len(want[p]))
			}
			want[p] = append(want[p], v)
			all = append(all, v)
		}
		c.WaitFor(time.Minute, "the group to read every record "+what, func() bool {
			a.mu.Lock()
			got := slices.Clone(a.got)
			a.mu.Unlock()
			b.mu.Lock()
			got = append(got, b.got...)
			b.mu.Unlock()
			seen := map[string]bool{}
			for _, v := range got {
				if seen[v] {
					t.Fatalf("%s: %s read twice (read %v)", what, v, got)
				}
				seen[v] = true
			}
			return len(seen) == len(all)
		})
		c.KgoCommitted("sarama-quiet", topic, 2, 0, int64(len(want[0])))
		c.WaitFor(time.Minute, "a partition for each member "+what, func() bool {
			a.mu.Lock()
			na := len(a.claims)
			a.mu.Unlock()
			b.mu.Lock()
			nb := len(b.claims)
			b.mu.Unlock()
			return na == 1 && nb == 1
		})
	}
	check("at first")
	if err := c.StopBroker(1); err != nil {
		t.Fatalf("controlled shutdown of broker 1: %v", err)
	}
	check("with broker 1 stopped")
	c.StartBroker(1)
	c.WaitFor(30*time.Second, "the full ISRs", func() bool {
		return len(c.Partition(topic, 0).GetIsr()) == 3 && len(c.Partition(topic, 1).GetIsr()) == 3
	})
	check("with broker 1 back")
}

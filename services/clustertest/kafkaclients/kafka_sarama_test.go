package kafkaclients

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"

	"tidemark.io/services/clustertest"
)

// sarama, a second Kafka client written independently of franz-go:
// an idempotent acks=all producer (gzip) and a partition consumer read the
// same records back in order.
func TestKafkaProduceConsumeWithSarama(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	c.KafkaCreate(kadm.NewClient(c.KafkaClient()), "sarama", 1, 3, nil)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = sarama.CompressionGZIP
	cfg.Producer.Retry.Max = 20
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Return.Errors = true
	prod, err := sarama.NewSyncProducer(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 50
	var want []string
	for i := range n {
		v := fmt.Sprintf("s%03d", i)
		want = append(want, v)
		p, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder(v)})
		if err != nil || p != 0 || off != int64(i) {
			t.Fatalf("send %s: partition %d offset %d, %v", v, p, off, err)
		}
	}

	cons, err := sarama.NewConsumer(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case m := <-pc.Messages():
			if m.Offset != int64(len(got)) {
				t.Fatalf("offset %d after %d records", m.Offset, len(got))
			}
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("consume: %v", err)
		case <-timeout:
			t.Fatalf("consumed %d of %d before the deadline", len(got), n)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// saramaHandler records what a sarama group member is given and marks it
// for commit.
type saramaHandler struct {
	mu     sync.Mutex
	got    []string
	claims map[int32]bool
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = map[int32]bool{}
	for _, ps := range s.Claims() {
		for _, p := range ps {
			h.claims[p] = true
		}
	}
	return nil
}
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.got = append(h.got, string(m.Value))
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *saramaHandler) count() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.got) }

// saramaMember runs one sarama group member until the returned stop.
func saramaMember(t *testing.T, c *clustertest.Cluster, group, topic string) (*saramaHandler, func()) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(c.KafkaAddrs(), group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &saramaHandler{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
				t.Logf("sarama member: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	stop := func() {
		cancel()
		<-done
		if err := cg.Close(); err != nil { // commits what was marked
			t.Errorf("close the sarama group member: %v", err)
		}
	}
	return h, stop
}

// sarama's ConsumerGroup, an independent implementation of the classic
// group protocol: two members split four partitions; one reads everything
// and commits; a later member of the same group reads only what came
// after the commit.
func TestSaramaConsumerGroupSharesAndResumes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
	c.KafkaCreate(kadm.NewClient(c.KafkaClient()), "sgroup", 4, 3, nil)
	cl := c.KafkaClient()
	for i := range 40 {
		clustertest.ProduceSync(t, cl, "sgroup", fmt.Sprintf("r%02d", i))
	}

	a, stopA := saramaMember(t, c, "sarama-readers", "sgroup")
	b, stopB := saramaMember(t, c, "sarama-readers", "sgroup")
	c.WaitFor(60*time.Second, "two members with two partitions each and every record read", func() bool {
		a.mu.Lock()
		na := len(a.claims)
		a.mu.Unlock()
		b.mu.Lock()
		nb := len(b.claims)
		b.mu.Unlock()
		return na == 2 && nb == 2 && a.count()+b.count() >= 40
	})
	stopA()
	stopB()
	seen := map[string]bool{}
	for _, v := range append(slices.Clone(a.got), b.got...) {
		seen[v] = true
	}
	if len(seen) != 40 {
		t.Fatalf("the two members read %d distinct records, want 40", len(seen))
	}

	for i := 40; i < 50; i++ {
		clustertest.ProduceSync(t, cl, "sgroup", fmt.Sprintf("r%02d", i))
	}
	later, stopLater := saramaMember(t, c, "sarama-readers", "sgroup")
	defer stopLater()
	// Per partition, records come in offset order: a member that started
	// before the commit would be handed old records first.
	c.WaitFor(60*time.Second, "the later member to read 10 records", func() bool { return later.count() >= 10 })
	later.mu.Lock()
	got := slices.Clone(later.got)
	later.mu.Unlock()
	slices.Sort(got)
	var want []string
	for i := 40; i < 50; i++ {
		want = append(want, fmt.Sprintf("r%02d", i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the later member read %q; want only %q", got, want)
	}
}

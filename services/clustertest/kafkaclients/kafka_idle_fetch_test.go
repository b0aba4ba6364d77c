package kafkaclients

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"tidemark.io/services/clustertest"
)

// idleKafkaReader is a franz-go consumer (no group) of every partition of a
// topic, polling in the background: what it read per partition, and the
// first gap or duplicate it saw.
type idleKafkaReader struct {
	mu    sync.Mutex
	read  map[int32][]string
	next  map[int32]int64
	fault string
}

func startIdleKafkaReader(c *clustertest.Cluster, topic string) *idleKafkaReader {
	c.T.Helper()
	cl := c.KafkaClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(500*time.Millisecond), kgo.MetadataMaxAge(2*time.Second), kgo.FetchMaxWait(time.Second))
	r := &idleKafkaReader{read: map[int32][]string{}, next: map[int32]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.T.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				if rec.Offset != r.next[rec.Partition] && r.fault == "" {
					r.fault = fmt.Sprintf("partition %d: offset %d read after %d", rec.Partition, rec.Offset, r.next[rec.Partition]-1)
				}
				r.next[rec.Partition] = rec.Offset + 1
				r.read[rec.Partition] = append(r.read[rec.Partition], string(rec.Value))
			})
			r.mu.Unlock()
		}
	}()
	return r
}

// waitRead waits until the reader holds exactly want per partition.
func (r *idleKafkaReader) waitRead(c *clustertest.Cluster, want map[int32][]string) {
	c.T.Helper()
	c.WaitFor(30*time.Second, fmt.Sprintf("the consumer to read %v", want), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fault != "" {
			c.T.Fatalf("the consumer read a gap or a duplicate: %s (read %v)", r.fault, r.read)
		}
		for p, vs := range want {
			if !slices.Equal(r.read[p], vs) {
				return false
			}
		}
		return true
	})
}

// A franz-go consumer left idle (long polls on quiet partitions) while the
// leader of one partition crashes and comes back twice in quick
// succession, leadership moves, and a partition is added: once the faults
// stop it must read every new record, each once and in order, from every
// partition, the new one included. (tidemark keeps no incremental fetch
// sessions, KIP-227: every fetch is a full one, so nothing a session would
// hold can go stale.)
func TestKafkaIdleConsumerAcrossRestartsAndNewPartitions(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	clustertest.CreateAssigned(t, c, "quiet", [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	prod := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	want := map[int32][]string{}
	write := func(partitions ...int32) {
		t.Helper()
		for _, p := range partitions {
			v := fmt.Sprintf("p%d-%d", p, len(want[p]))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := prod.ProduceSync(ctx, &kgo.Record{Topic: "quiet", Partition: p, Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			want[p] = append(want[p], v)
		}
	}
	r := startIdleKafkaReader(c, "quiet")
	write(0, 1, 0, 1)
	r.waitRead(c, want)

	fullISR := func(partitions int32) func() bool {
		return func() bool {
			for p := range partitions {
				if pd := c.Partition("quiet", p); pd.GetLeader() <= 0 || len(pd.GetIsr()) != 3 {
					return false
				}
			}
			return true
		}
	}
	for range 2 {
		c.CrashBroker(1)
		c.StartBroker(1)
	}
	c.WaitBrokerAlive(1)
	c.WaitFor(30*time.Second, "a leader and the full ISR again", fullISR(2))
	adm := kadm.NewClient(prod)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := adm.CreatePartitions(ctx, 1, "quiet"); err != nil || resp["quiet"].Err != nil {
		t.Fatalf("add a partition: %v %v", err, resp)
	}
	c.WaitFor(30*time.Second, "the new partition led with the full ISR", fullISR(3))
	time.Sleep(3 * time.Second) // idle: the consumer's fetches park and time out

	write(0, 1, 2, 0, 1, 2)
	r.waitRead(c, want)
}

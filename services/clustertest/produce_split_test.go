package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// A batch.size above the topic's max.message.bytes: the leader refuses the
// full batches as MESSAGE_TOO_LARGE, and the producer halves them until they
// fit, as Kafka's does. Every record is written once, in order; a record too
// large on its own fails with the leader's code and the records around it
// are written.
func TestProducerSplitsBatchesTheLeaderRefusesAsTooLarge(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	for _, idem := range []client.Idempotence{client.IdempotenceOn, client.IdempotenceOff} {
		name := map[client.Idempotence]string{client.IdempotenceOn: "idempotent", client.IdempotenceOff: "plain"}[idem]
		t.Run(name, func(t *testing.T) {
			topic := "split-" + name
			c.CreateTopic(topic, 1, 3, map[string]string{"max.message.bytes": "4096", "min.insync.replicas": "2"})
			o := client.ProducerOptions{Acks: client.AcksAll, Idempotence: idem, BatchSize: 64 << 10,
				Linger: 20 * time.Millisecond, DeliveryTimeout: 60 * time.Second}
			if idem == client.IdempotenceOff {
				o.MaxInFlight = 1 // keeps order without sequences
			}
			p, err := client.NewProducer(c.Client(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())

			const n = 200
			value := func(i int) string { return fmt.Sprintf("%04d-%s", i, strings.Repeat("v", 600)) }
			tooBig := n / 2 // this one alone exceeds 4096 bytes
			type outcome struct {
				res client.Result
				err error
			}
			got := make([]outcome, n)
			var wg sync.WaitGroup
			var done atomic.Int32
			for i := range n {
				v := value(i)
				if i == tooBig {
					v = strings.Repeat("x", 5000)
				}
				wg.Add(1)
				p.ProduceAsync(client.Record{Topic: topic, Partition: 0, ManualPartition: true, Value: []byte(v)},
					func(r client.Result, err error) { got[i] = outcome{r, err}; done.Add(1); wg.Done() })
			}
			// Flush waits for the batches it saw; split ones included.
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d := done.Load(); d != n {
				t.Fatalf("Flush returned with %d of %d callbacks run", d, n)
			}
			wg.Wait()

			var want []string
			next := int64(0)
			for i, g := range got {
				if i == tooBig {
					var ke *kerr.Error
					if !errors.As(g.err, &ke) || ke.Code != kerr.MessageTooLarge || g.res.Offset != -1 {
						t.Fatalf("record %d (5000 bytes, max.message.bytes 4096): %+v %v, want MESSAGE_TOO_LARGE", i, g.res, g.err)
					}
					continue
				}
				if g.err != nil || g.res.Offset != next {
					t.Fatalf("record %d: offset %d err %v, want offset %d", i, g.res.Offset, g.err, next)
				}
				next++
				want = append(want, value(i))
			}
			leader := c.Partition(topic, 0).GetLeader()
			logged := c.SameLogs(topic, 0, 1, 2, 3)
			if len(logged) != len(want) {
				t.Fatalf("leader %d's log holds %d records, want %d", leader, len(logged), len(want))
			}
			for i := range want {
				if logged[i] != want[i] {
					t.Fatalf("log record %d is %.10q, want %.10q: order or duplicates", i, logged[i], want[i])
				}
			}
		})
	}
}

// After the leader forgot an idempotent producer (producer.id.expiration.ms
// of 1 ms; the test runs the expiry pass itself), the
// producer pipelines again at once. Here its first batch is refused before
// the sequence check (too large: it is split and sent again) while the
// second is in flight. The leader now answers the second UNKNOWN_PRODUCER_ID
// (it does not start at sequence 0), and the producer starts a new epoch
// and writes both in order. Accepted, as Kafka accepts any sequence from a
// producer it does not know, the second landed first and its callback ran
// first.
func TestAnExpiredProducersPipelinedBatchesStayInOrder(t *testing.T) {
	c := Start(t, Options{Brokers: 1, BrokerSettings: map[string]string{"producer.id.expiration.ms": "1"}})
	const topic = "expired-producer"
	c.CreateTopic(topic, 1, 1, map[string]string{"max.message.bytes": "4096"})
	p, err := client.NewProducer(c.Client(), client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOn,
		BatchSize: 5000, Linger: 200 * time.Millisecond, DeliveryTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	expire := func() int {
		for _, r := range c.Broker(1).Replicas().Replicas() {
			if r.TP().Topic == topic {
				return r.Log().(interface{ ExpireProducers() int }).ExpireProducers()
			}
		}
		t.Fatal("broker 1 does not host the partition")
		return 0
	}
	var mu sync.Mutex
	var callbacks, want []string
	for round := range 3 {
		// The producer's state under its current identity; then the
		// leader forgets it.
		if _, err := p.Produce(context.Background(), client.Record{Topic: topic, Partition: 0, ManualPartition: true,
			Value: []byte(fmt.Sprintf("old-%d", round))}); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("old-%d", round))
		expired := 0
		c.WaitFor(10*time.Second, "the leader to forget the producer", func() bool {
			expired += expire()
			return expired > 0
		})
		if expired != 1 {
			t.Fatalf("round %d: expired %d producers, want 1", round, expired)
		}
		// Records 0 and 1 make a batch above max.message.bytes; record 2
		// goes in the next batch.
		for i, size := range []int{2100, 2100, 1500} {
			name := fmt.Sprintf("r%d-%d", round, i)
			want = append(want, name)
			p.ProduceAsync(client.Record{Topic: topic, Partition: 0, ManualPartition: true, Value: []byte(name + "/" + strings.Repeat("v", size))},
				func(_ client.Result, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
					callbacks = append(callbacks, name)
				})
		}
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var logged []string
	for _, v := range c.Values(1, topic, 0) {
		logged = append(logged, strings.SplitN(v, "/", 2)[0])
	}
	if !slices.Equal(logged, want) {
		t.Fatalf("the log holds %v, want %v", logged, want)
	}
	mu.Lock()
	defer mu.Unlock()
	var wantCallbacks []string
	for _, w := range want {
		if !strings.HasPrefix(w, "old-") {
			wantCallbacks = append(wantCallbacks, w)
		}
	}
	if !slices.Equal(callbacks, wantCallbacks) {
		t.Fatalf("callbacks ran in the order %v, want %v", callbacks, wantCallbacks)
	}
}

package clustertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A Kafka client (franz-go, idempotent, acks=all) writing while etcd is out
// of reach for every node for three session timeouts: every leader fences
// itself and refuses, and the records wait in the client; once etcd is back
// every one is delivered, once and in order.
func TestKafkaProducerWaitsOutAnEtcdOutage(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Kafka: true, PausableControllers: true})
	adm := kadm.NewClient(c.kafkaClient())
	c.kafkaCreate(adm, "eo", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	prod := c.kafkaClient(kgo.DefaultProduceTopic("eo"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	produceSync(t, prod, "eo", "v00000")

	ttl := c.BrokerConfig(1).SessionTimeout
	ctx := ctxFor(t, 60*time.Second)
	const n = 300
	var (
		mu     sync.Mutex
		failed []error
		wg     sync.WaitGroup
	)
	outage := make(chan struct{})
	go func() {
		defer close(outage)
		time.Sleep(ttl / 2)
		for _, b := range c.etcdLinks {
			b.Pause()
		}
		for _, b := range c.ctrlEtcd {
			b.Pause()
		}
		time.Sleep(3 * ttl)
		for _, b := range c.etcdLinks {
			b.Resume()
		}
		for _, b := range c.ctrlEtcd {
			b.Resume()
		}
	}()
	for i := 1; i < n; i++ {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%05d", i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
		time.Sleep(5 * ttl / n) // spread over the outage
	}
	wg.Wait()
	<-outage
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	cons := c.kafkaClient(kgo.ConsumeTopics("eo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeAll(t, cons, n)[0]
	for i, v := range got {
		if want := fmt.Sprintf("v%05d", i); v != want {
			t.Fatalf("record %d is %s, want %s (lost, duplicated or reordered)", i, v, want)
		}
	}
}

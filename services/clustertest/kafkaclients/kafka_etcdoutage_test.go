package kafkaclients

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"tidemark.io/services/clustertest"
)

// A Kafka client (franz-go, idempotent, acks=all) writing while etcd is out
// of reach for every node for three session timeouts. Every leader fences
// itself, but its in-sync followers still fetch from it and vouch for it,
// so acks=all writes go on past the session timeout. Once etcd is reachable
// every lease has expired: each broker registers again and refuses until
// the controller has told it its roles, and the records wait in the
// client. Every one is delivered, once and in order.
func TestKafkaProducerWaitsOutAnEtcdOutage(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, PausableControllers: true})
	adm := kadm.NewClient(c.KafkaClient())
	c.KafkaCreate(adm, "eo", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	prod := c.KafkaClient(kgo.DefaultProduceTopic("eo"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	clustertest.ProduceSync(t, prod, "eo", "v00000")

	ttl := c.BrokerConfig(1).SessionTimeout
	ctx := clustertest.CtxFor(t, 60*time.Second)
	const n = 300
	var (
		mu       sync.Mutex
		failed   []error
		acked    []time.Time
		cut, end time.Time
		wg       sync.WaitGroup
	)
	outage := make(chan struct{})
	go func() {
		defer close(outage)
		time.Sleep(ttl / 2)
		c.CutEtcdForAll(true)
		mu.Lock()
		cut = time.Now()
		mu.Unlock()
		time.Sleep(3 * ttl)
		mu.Lock()
		end = time.Now()
		mu.Unlock()
		c.CutEtcdForAll(false)
	}()
	for i := 1; i < n; i++ {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%05d", i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
			} else {
				acked = append(acked, time.Now())
			}
		})
		time.Sleep(5 * ttl / n) // spread over the outage
	}
	wg.Wait()
	<-outage
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	during := 0
	for _, at := range acked {
		if at.After(cut.Add(ttl)) && at.Before(end) {
			during++
		}
	}
	t.Logf("%d of %d records acknowledged while etcd was out of reach past the session timeout", during, len(acked))
	if during == 0 {
		t.Error("no record acknowledged while etcd was out of reach past the session timeout: the fenced leaders' followers did not vouch for them")
	}
	cons := c.KafkaClient(kgo.ConsumeTopics("eo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeAll(t, cons, n)[0]
	for i, v := range got {
		if want := fmt.Sprintf("v%05d", i); v != want {
			t.Fatalf("record %d is %s, want %s (lost, duplicated or reordered)", i, v, want)
		}
	}
}

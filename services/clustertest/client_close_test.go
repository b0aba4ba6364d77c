package clustertest

import (
	"context"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/testenv"
)

// A client cut off from every broker with writes on their way closes its
// connections together: gRPC gives each up to 5 s to take its GOAWAY, and
// closed one after another three stalled brokers cost 15 s (so did a
// broker stopping while cut off from its peers, whose connection pool is
// the same).
func TestClientCloseCutOffFromEveryBrokerWaitsOnceNotPerBroker(t *testing.T) {
	testenv.SkipIfShort(t, "waits out gRPC's 5 s GOAWAY grace of stalled connections")
	c := Start(t, Options{})
	const topic = "cut-off-close"
	c.CreateTopic(topic, 3, 3, nil)
	c.WaitAnnounced(topic, 3)
	cl := c.GroupClientVia("cut-off-client")
	p, err := client.NewProducer(cl, client.ProducerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaders := map[int32]bool{}
	for part := range int32(3) {
		if _, err := p.Produce(ctx, client.Record{Topic: topic, Partition: part, ManualPartition: true, Value: []byte("first")}); err != nil {
			t.Fatal(err)
		}
		leaders[c.Leader(topic, part)] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("the partitions' leaders are %v: the test needs connections to several brokers", leaders)
	}
	c.Net.Pause("cut-off-client")
	t.Cleanup(func() { c.Net.Resume("cut-off-client") })
	for i := range 30 {
		p.ProduceAsync(client.Record{Topic: topic, Partition: int32(i % 3), ManualPartition: true, Value: []byte("stalled")},
			func(client.Result, error) {})
	}
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer closeCancel()
	_ = p.Close(closeCtx)
	closed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		_ = cl.Close()
		closed <- time.Since(start)
	}()
	// One grace is 5 s; one per broker in turn was 5 s times the brokers.
	bound := 5*time.Second + 4*time.Second
	select {
	case took := <-closed:
		t.Logf("Client.Close cut off from %d leaders took %s", len(leaders), took.Round(time.Millisecond))
		if took > bound {
			t.Fatalf("Client.Close cut off from %d leaders took %s: one 5 s wait per connection", len(leaders), took.Round(time.Millisecond))
		}
	case <-time.After(time.Minute):
		t.Fatal("Client.Close cut off from every broker has not returned after a minute")
	}
}

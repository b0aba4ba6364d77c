package broker_test

import (
	"context"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// A broker that has just started and has had no UpdateMetadata yet does not
// know which topics exist: it answers Metadata, and Produce and Fetch for
// partitions it does not know, with the retriable LEADER_NOT_AVAILABLE
// rather than UNKNOWN_TOPIC_OR_PARTITION, and a producer that bootstraps
// from it gets its metadata from another broker and succeeds.
func TestRestartedBrokerWithoutMetadataAnswersRetriably(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.ctrl.createTopic("m", 1, 2, nil)
	c.ctrl.createTopic("n", 1, 1, nil) // on broker 1 only
	ctx := context.Background()
	if _, err := c.client(1).Produce(ctx, &brokerv1.ProduceRequest{Topic: "n", Acks: 1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("before")}}); err != nil {
		t.Fatal(err)
	}

	// Broker 2 restarts; the controller has not told it anything yet.
	c.crash(2)
	c.ctrl.brokerDown(2)
	var b *broker.Broker
	var err error
	for range 50 { // the port may linger briefly after a crash
		if b, err = broker.Start(ctx, c.cfgs[2], nil); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	c.brokers[2] = b
	cl2 := c.client(2)
	retriable := func(what string, err error) {
		t.Helper()
		e := kerr.FromStatus(err)
		if err == nil || e.Code != kerr.LeaderNotAvailable || !e.Code.Retriable() {
			t.Fatalf("%s on a broker without metadata: %v, want the retriable LEADER_NOT_AVAILABLE", what, err)
		}
	}
	resp, err := cl2.Metadata(ctx, &brokerv1.MetadataRequest{Topics: []string{"n"}})
	if err == nil {
		t.Fatalf("Metadata of n on a broker without metadata answered %v, want the retriable LEADER_NOT_AVAILABLE", resp)
	}
	retriable("Metadata of n", err)
	_, err = cl2.Metadata(ctx, &brokerv1.MetadataRequest{})
	retriable("Metadata of every topic", err)
	_, err = cl2.Produce(ctx, &brokerv1.ProduceRequest{Topic: "n", Acks: 1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}})
	retriable("Produce to n-0", err)
	_, err = cl2.Fetch(ctx, &brokerv1.FetchRequest{Topic: "n", Offset: 0, MaxBytes: 1 << 20})
	retriable("Fetch of n-0", err)

	// A producer bootstrapping from the restarted broker first.
	cl, err := client.New([]string{c.cfgs[2].Listen, c.cfgs[1].Listen}, client.Options{RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := client.NewProducer(cl, client.ProducerOptions{MaxBlock: 5 * time.Second, DeliveryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := p.Produce(pctx, client.Record{Topic: "n", Value: []byte("after")}); err != nil {
		t.Fatalf("producer bootstrapping from the restarted broker: %v", err)
	}

	// Once the controller's full UpdateMetadata arrives, an unknown topic
	// is final again.
	c.ctrl.addBroker(2, b.Addr())
	if _, err := cl2.Metadata(ctx, &brokerv1.MetadataRequest{Topics: []string{"n"}}); err != nil {
		t.Fatalf("Metadata after UpdateMetadata: %v", err)
	}
	_, err = cl2.Produce(ctx, &brokerv1.ProduceRequest{Topic: "nope", Acks: 1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}})
	if kerr.FromStatus(err).Code != kerr.UnknownTopicOrPartition {
		t.Fatalf("Produce to an unknown topic with metadata: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

package client_test

import (
	"bytes"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
)

// A record larger than the client's MaxMessageBytes cannot be sent in any
// request: it must fail at once with MESSAGE_TOO_LARGE (Kafka's
// RecordTooLargeException for max.request.size), not be retried until
// delivery.timeout.ms, breaking the shared produce stream on every attempt.
func TestRecordLargerThanMaxMessageBytesFailsAtOnce(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 2)
	o := testOptions()
	o.MaxMessageBytes = 1 << 20
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := newProducer(t, c, client.ProducerOptions{Linger: -1, DeliveryTimeout: 8 * time.Second})
	ctx := testCtx(t, 20*time.Second)
	start := time.Now()
	_, err = p.Produce(ctx, client.Record{Topic: "t", Partition: 0, ManualPartition: true, Value: bytes.Repeat([]byte("x"), 2<<20)})
	el := time.Since(start)
	t.Logf("after %v: %v", el, err)
	if codeOf(err) != kerr.MessageTooLarge || el > 2*time.Second {
		t.Fatalf("a 2 MiB record with MaxMessageBytes 1 MiB: after %v: %v (want MESSAGE_TOO_LARGE at once)", el, err)
	}
}

package client_test

import (
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// A record without a topic can never be written: the producer should say
// so at once rather than wait max.block.ms for metadata of topic "".
func TestRecordWithoutTopicFailsAtOnce(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{MaxBlock: 5 * time.Second})
	start := time.Now()
	_, err := p.Produce(testCtx(t, 10*time.Second), client.Record{Value: []byte("v")})
	el := time.Since(start)
	t.Logf("after %v: %v (code %v)", el, err, codeOf(err))
	if err == nil || el > time.Second {
		t.Fatalf("a record without a topic: after %v: %v", el, err)
	}
}

package broker_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"tidemark.io/services/broker"
)

// An acks=all write held back by a follower that stopped fetching is
// committed by the ISR shrink: the leader's HW advances when the
// controller accepts the smaller ISR, not on a follower fetch. That HW
// advance must be in a trace too: the produce span links to what committed
// its batch (here the broker.isr_shrink span), as it does to a fetch.
func TestHWAdvanceByISRShrinkIsTraced(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	c := newClusterFn(t, 3, map[string]string{"replica.lag.time.max.ms": "1000"}, func(cfg *broker.Config) {
		cfg.Telemetry.Exporter = exp
	})
	c.ctrl.createTopic("shr", 1, 3, nil)
	if _, err := c.produce("shr", 0, -1, "a"); err != nil {
		t.Fatal(err)
	}
	if l := c.ctrl.state("shr", 0).leader; l != 1 {
		t.Skipf("leader %d, want 1", l)
	}
	c.net.Partition(name(1), name(3))
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if _, err := c.produce("shr", 0, -1, "b"); err != nil {
		t.Fatal(err)
	}
	t.Logf("acks=all write committed after %s (by the ISR shrink)", time.Since(start))
	if isr := c.ctrl.state("shr", 0).isr; len(isr) != 2 {
		t.Fatalf("ISR %v after the write; want the shrink to have committed it", isr)
	}
	c.net.HealAll()
	for id, b := range c.brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.Stop(ctx)
		cancel()
		delete(c.brokers, id)
	}
	spans := exp.GetSpans().Snapshots()
	ids := map[trace.SpanID]string{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = s.Name()
	}
	var produces, linked int
	for _, s := range spans {
		if s.Name() != "tidemark.broker.v1.BrokerService/Produce" || s.SpanKind() != trace.SpanKindServer {
			continue
		}
		produces++
		for _, l := range s.Links() {
			if name, ok := ids[l.SpanContext.SpanID()]; ok {
				t.Logf("produce span links to %s", name)
				linked++
			}
		}
	}
	if produces < 2 {
		t.Fatalf("%d produce spans", produces)
	}
	if linked < 2 {
		t.Fatalf("%d of %d acks=all produce spans link to what committed them; the write committed by the ISR shrink links to nothing", linked, produces)
	}
}

package broker_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/telemetry"
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

// A follower's fetch span says it moved the HW only when the leader's span
// of the same round trip says so: a HW moved by the other follower while
// this fetch was parked is not this round trip's doing.
func TestFollowerFetchSpanClaimsOnlyItsOwnHWAdvance(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	c := newClusterFn(t, 3, nil, func(cfg *broker.Config) {
		cfg.Telemetry.Exporter = exp
	})
	c.ctrl.createTopic("own", 1, 3, nil)
	for i := 0; i < 10; i++ {
		if _, err := c.produce("own", 0, -1, "x"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for id, b := range c.brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.Stop(ctx)
		cancel()
		delete(c.brokers, id)
	}
	spans := exp.GetSpans().Snapshots()
	leaderAdvanced := map[trace.TraceID]bool{}
	for _, s := range spans {
		if s.Name() == telemetry.ReplicaFetchSpan && s.SpanKind() == trace.SpanKindServer {
			if adv, _ := attr(s, telemetry.AttrHWAdvanced); adv.AsBool() {
				leaderAdvanced[s.SpanContext().TraceID()] = true
			}
		}
	}
	var claims, wrong int
	for _, s := range spans {
		if s.Name() != telemetry.ReplicaFetchSpan || s.SpanKind() != trace.SpanKindClient {
			continue
		}
		if adv, _ := attr(s, telemetry.AttrHWAdvanced); !adv.AsBool() {
			continue
		}
		claims++
		if !leaderAdvanced[s.SpanContext().TraceID()] {
			wrong++
			advances, _ := attr(s, "tidemark.hw.advances")
			t.Logf("follower span claims %s; the leader's span of its round trip moved no HW", advances.AsString())
		}
	}
	if claims == 0 {
		t.Fatal("no follower fetch span claims a HW advance")
	}
	if wrong > 0 {
		t.Errorf("%d of %d follower fetch spans claim a HW advance their round trip did not make", wrong, claims)
	}
}

// The controller drops a dead follower from the ISR with the leader
// unchanged (its session expired before the leader's own lag check did):
// the leader's HW advances when it applies the LeaderAndIsr, committing a
// parked acks=all write. That advance is traced too, and the write's
// produce span links to it.
func TestHWAdvanceByLeaderAndIsrIsTraced(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	c := newClusterFn(t, 3, map[string]string{"replica.lag.time.max.ms": "30000"}, func(cfg *broker.Config) {
		cfg.Telemetry.Exporter = exp
	})
	c.ctrl.createTopic("lai", 1, 3, nil)
	if _, err := c.produce("lai", 0, -1, "a"); err != nil {
		t.Fatal(err)
	}
	if l := c.ctrl.state("lai", 0).leader; l != 1 {
		t.Skipf("leader %d, want 1", l)
	}
	c.crash(3)
	done := make(chan error, 1)
	go func() {
		_, err := c.produce("lai", 0, -1, "b")
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("acks=all write answered (%v) with a dead ISR member", err)
	default:
	}
	c.ctrl.brokerDown(3)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for id, b := range c.brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.Stop(ctx)
		cancel()
		delete(c.brokers, id)
	}
	spans := exp.GetSpans().Snapshots()
	ids := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = s
	}
	var produces, linked int
	for _, s := range spans {
		if s.Name() != telemetry.ProduceSpan || s.SpanKind() != trace.SpanKindServer {
			continue
		}
		produces++
		for _, l := range s.Links() {
			if by, ok := ids[l.SpanContext.SpanID()]; ok {
				before, _ := attr(by, "tidemark.hw.before")
				after, _ := attr(by, "tidemark.hw.after")
				t.Logf("produce span links to %s (hw %d to %d)", by.Name(), before.AsInt64(), after.AsInt64())
				linked++
			}
		}
	}
	if produces != 2 {
		t.Fatalf("%d produce spans, want 2", produces)
	}
	if linked != 2 {
		t.Fatalf("%d of 2 acks=all produce spans link to what committed them; the write committed by the LeaderAndIsr links to nothing", linked)
	}
}

package broker_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/telemetry"
)

// keptSpans is an in-memory exporter shared by several brokers; unlike the
// stock one, one broker's shutdown does not wipe what the others exported.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// Every exported follower fetch round trip is one that moved the HW (idle
// long polls are dropped); the leader's span shows hw.before < hw.after and
// shares its trace with the follower's span; an acks=all produce span links
// to the fetch that committed it.
func TestHWAdvancingFetchesAreTracedAndLinked(t *testing.T) {
	for _, mode := range []string{telemetry.FetchesAdvancing, telemetry.FetchesAll} {
		t.Run(mode, func(t *testing.T) {
			exp := keptSpans{tracetest.NewInMemoryExporter()}
			c := newClusterFn(t, 3, nil, func(cfg *broker.Config) {
				cfg.Telemetry.Exporter = exp
				cfg.Telemetry.Fetches = mode
			})
			c.ctrl.createTopic("traced", 1, 3, map[string]string{"min.insync.replicas": "2"})
			for i := 0; i < 3; i++ {
				if _, err := c.produce("traced", 0, -1, "x"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(1200 * time.Millisecond) // let followers idle-poll a few times
			for id, b := range c.brokers {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = b.Stop(ctx) // flushes the exporter
				cancel()
				delete(c.brokers, id)
			}
			spans := exp.GetSpans().Snapshots()
			var fetchServer, fetchClient, idle int
			serverTraces := map[trace.TraceID]bool{}
			fetchSpans := map[trace.SpanID]bool{}
			for _, s := range spans {
				if s.Name() != telemetry.ReplicaFetchSpan {
					continue
				}
				adv, ok := attr(s, telemetry.AttrHWAdvanced)
				if !ok || !adv.AsBool() {
					idle++
					continue
				}
				switch s.SpanKind() {
				case trace.SpanKindServer:
					fetchServer++
					serverTraces[s.SpanContext().TraceID()] = true
					fetchSpans[s.SpanContext().SpanID()] = true
					before, _ := attr(s, "tidemark.hw.before")
					after, _ := attr(s, "tidemark.hw.after")
					if before.AsInt64() >= after.AsInt64() {
						t.Errorf("advancing fetch span with hw.before %d >= hw.after %d", before.AsInt64(), after.AsInt64())
					}
				case trace.SpanKindClient:
					fetchClient++
				}
			}
			if fetchServer == 0 || fetchClient == 0 {
				t.Fatalf("HW-advancing fetch spans: %d leader, %d follower; want both", fetchServer, fetchClient)
			}
			joined := false
			for _, s := range spans {
				if s.Name() == telemetry.ReplicaFetchSpan && s.SpanKind() == trace.SpanKindClient && serverTraces[s.SpanContext().TraceID()] {
					joined = true
				}
			}
			if !joined {
				t.Error("no follower fetch span shares a trace with a leader fetch span")
			}
			if mode == telemetry.FetchesAdvancing && idle > 0 {
				t.Errorf("%d idle fetch spans exported in mode %s", idle, mode)
			}
			if mode == telemetry.FetchesAll && idle == 0 {
				t.Errorf("mode all exported no idle fetch spans")
			}
			linked := 0
			for _, s := range spans {
				if s.Name() != "tidemark.broker.v1.BrokerService/Produce" {
					continue
				}
				for _, l := range s.Links() {
					if fetchSpans[l.SpanContext.SpanID()] {
						linked++
					}
				}
			}
			if linked < 3 {
				t.Errorf("%d of 3 acks=all produce spans link to the committing fetch", linked)
			}
		})
	}
}

// ISR changes appear in traces with their reasons and outcomes.
func TestISRChangesAreSpans(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	c := newClusterFn(t, 3, map[string]string{"replica.lag.time.max.ms": "1000"}, func(cfg *broker.Config) {
		cfg.Telemetry.Exporter = exp
	})
	c.ctrl.createTopic("isr", 1, 3, nil)
	if _, err := c.produce("isr", 0, -1, "a"); err != nil {
		t.Fatal(err)
	}
	c.net.Partition(name(1), name(3))
	if _, err := c.produce("isr", 0, 1, "b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "shrink", func() bool { return len(c.ctrl.state("isr", 0).isr) == 2 })
	c.net.HealAll()
	waitFor(t, 5*time.Second, "expand", func() bool { return len(c.ctrl.state("isr", 0).isr) == 3 })
	time.Sleep(200 * time.Millisecond)
	for id, b := range c.brokers {
		_ = b.Stop(context.Background())
		delete(c.brokers, id)
	}
	found := map[string]string{}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "broker.isr_shrink" || s.Name() == "broker.isr_expand" {
			reason, _ := attr(s, "tidemark.reason")
			outcome, _ := attr(s, "tidemark.outcome")
			found[s.Name()] = reason.AsString() + " / " + outcome.AsString()
		}
	}
	if want := "Shrinking ISR from 1,2,3 to 1,2 / committed"; found["broker.isr_shrink"] != want {
		t.Errorf("shrink span %q, want %q", found["broker.isr_shrink"], want)
	}
	if want := "Expanding ISR from 1,2 to 1,2,3 / committed"; found["broker.isr_expand"] != want {
		t.Errorf("expand span %q, want %q", found["broker.isr_expand"], want)
	}
}

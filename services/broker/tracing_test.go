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

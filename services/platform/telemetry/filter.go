package telemetry

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ReplicaFetchSpan is the span name of a follower fetch round trip, on both
// ends (the follower's client span and the leader's server span).
const ReplicaFetchSpan = "tidemark.replication.v1.ReplicationService/ReplicaFetch"

// ProduceSpan is the span name of one produce request, unary or on a
// produce stream (which is traced per request, not as one span).
const ProduceSpan = "tidemark.broker.v1.BrokerService/Produce"

// ProduceStreamMethod is the full gRPC method of the produce stream.
const ProduceStreamMethod = "/tidemark.broker.v1.BrokerService/ProduceStream"

// AttrHWAdvanced marks a fetch round trip that moved a leader's HW.
const AttrHWAdvanced = "tidemark.hw.advanced"

// Fetch trace modes (--trace.fetches).
const (
	FetchesAdvancing = "advancing" // export fetch round trips that moved a HW (default)
	FetchesAll       = "all"       // export every fetch round trip
	FetchesNone      = "none"      // export no fetch round trips
)

func validFetchMode(m string) error {
	switch m {
	case FetchesAdvancing, FetchesAll, FetchesNone:
		return nil
	}
	return fmt.Errorf("must be %s, %s or %s", FetchesAdvancing, FetchesAll, FetchesNone)
}

// fetchFilter drops follower fetch spans that moved no HW: followers long
// poll the leader every replica.fetch.wait.max.ms, and exporting every idle
// poll would drown the traces worth reading (the ones that committed data).
type fetchFilter struct {
	next sdktrace.SpanProcessor
	mode string
}

func (f fetchFilter) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { f.next.OnStart(ctx, s) }

func (f fetchFilter) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() == ReplicaFetchSpan && !f.keep(s) {
		return
	}
	f.next.OnEnd(s)
}

func (f fetchFilter) keep(s sdktrace.ReadOnlySpan) bool {
	switch f.mode {
	case FetchesAll:
		return true
	case FetchesNone:
		return false
	}
	for _, a := range s.Attributes() {
		if string(a.Key) == AttrHWAdvanced {
			return a.Value.AsBool()
		}
	}
	return false
}

func (f fetchFilter) Shutdown(ctx context.Context) error   { return f.next.Shutdown(ctx) }
func (f fetchFilter) ForceFlush(ctx context.Context) error { return f.next.ForceFlush(ctx) }

package ctrl

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/metastore"
)

// traceDecision records one written partition decision (an election, an
// unclean election, an ISR change the controller made) as a span whose
// attributes say what changed and why, so a trace viewer shows elections
// next to the fetches and produces around them.
func (a *Active) traceDecision(kind controlv1.EventKind, c change, old, s metastore.PartitionState) {
	if a.d.Tracer == nil {
		return
	}
	_, span := a.d.Tracer.Start(context.Background(), "controller."+kindName(kind),
		trace.WithAttributes(
			attribute.String("tidemark.partition", c.p.tp().String()),
			attribute.Int("tidemark.controller_epoch", int(a.epoch)),
			attribute.Int("tidemark.leader.before", int(old.Leader)),
			attribute.Int("tidemark.leader.after", int(s.Leader)),
			attribute.Int("tidemark.leader_epoch", int(s.LeaderEpoch)),
			attribute.String("tidemark.isr.before", fmt.Sprint(old.ISR)),
			attribute.String("tidemark.isr.after", fmt.Sprint(s.ISR)),
			attribute.String("tidemark.cause", string(c.cause)),
			attribute.Bool("tidemark.unclean", c.d.Unclean),
			attribute.String("tidemark.reason", c.d.Reason),
		))
	span.End()
}

// traceFailover records this controller taking office: from the election
// (or the previous controller's loss, when known) to the state being pushed.
func (a *Active) traceFailover(at time.Time, complete bool, requests int) {
	if a.d.Tracer == nil {
		return
	}
	start := a.electedAt
	if lost := a.lostAt(); !lost.IsZero() && lost.Before(start) {
		start = lost
	}
	_, span := a.d.Tracer.Start(context.Background(), "controller.failover", trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.Int("tidemark.controller_epoch", int(a.epoch)),
			attribute.Int("tidemark.controller_id", int(a.self.GetId())),
			attribute.Bool("tidemark.all_delivered", complete),
			attribute.Int("tidemark.requests", requests),
		))
	span.AddEvent("state pushed to the live brokers", trace.WithTimestamp(at))
	span.End(trace.WithTimestamp(at))
}

func kindName(k controlv1.EventKind) string {
	switch k {
	case controlv1.EventKind_EVENT_KIND_UNCLEAN_LEADER_ELECTION:
		return "unclean_leader_election"
	case controlv1.EventKind_EVENT_KIND_PREFERRED_LEADER_ELECTION:
		return "preferred_leader_election"
	case controlv1.EventKind_EVENT_KIND_ISR_SHRINK:
		return "isr_shrink"
	}
	return "leader_election"
}

package clustertest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"tidemark.io/services/controller"
)

type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// Leader elections and controller failover appear in traces with their
// reasons.
func TestElectionsAndFailoverAreSpans(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	c := Start(t, Options{AdjustController: func(cfg *controller.Config) { cfg.Telemetry.Exporter = exp }})
	c.CreateTopic("e", 1, 3, nil)
	leader := c.Leader("e", 0)
	c.CrashBroker(leader)
	c.WaitFor(10*time.Second, "a new leader", func() bool { l := c.Partition("e", 0).GetLeader(); return l >= 0 && l != leader })
	active, _ := c.ActiveController()
	c.StopController(active)
	c.WaitFor(10*time.Second, "the standby to take office", func() bool { id, _ := c.ActiveController(); return id >= 0 && id != active })
	time.Sleep(300 * time.Millisecond)
	for id := int32(1); id <= 2; id++ {
		if id != active {
			c.StopController(id) // flush its spans
		}
	}
	var election, failover bool
	for _, s := range exp.GetSpans().Snapshots() {
		switch s.Name() {
		case "controller.leader_election":
			for _, a := range s.Attributes() {
				if a.Key == "tidemark.reason" && a.Value.AsString() != "" {
					election = true
				}
			}
		case "controller.failover":
			failover = true
		}
	}
	if !election || !failover {
		t.Fatalf("spans: leader election %v, failover %v; want both", election, failover)
	}
}

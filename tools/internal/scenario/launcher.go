package scenario

import (
	"context"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/tools/internal/devcluster"
)

// Launcher plays the scenarios inside the dev launcher, for its control
// API's RunScenario (the console's Scenarios panel): the launcher is the
// one process that can kill and pause nodes, and the run outlives a
// closed page long enough to heal the cluster.
type Launcher struct {
	// Options are every run's (Wait, LagTime); Out and Events are set per run.
	Options Options
}

var _ devcluster.Scenarios = Launcher{}

// List describes the scenarios in the note's order.
func (Launcher) List() []*devclusterv1.ScenarioInfo {
	var out []*devclusterv1.ScenarioInfo
	for _, s := range All() {
		out = append(out, &devclusterv1.ScenarioInfo{Name: s.Name, Title: s.Title, Note: s.Note, Rule: s.Rule})
	}
	return out
}

// Run discovers the cluster through the launcher's own control API and
// plays the named scenario, sending its timeline to emit.
func (l Launcher) Run(ctx context.Context, name, control string, o devcluster.Options, emit func(*devclusterv1.RunScenarioResponse)) error {
	env, err := Discover(ctx, control, o.Security())
	if err != nil {
		return err
	}
	ro := l.Options
	ro.Events = emit
	_, err = Run(ctx, name, env, ro)
	return err
}

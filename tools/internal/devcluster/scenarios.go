package devcluster

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// Scenarios plays scenarios against the launched cluster. The launcher
// runs them in its own process because only it can kill, stop and pause
// nodes; the scenario package implements this (devcluster does not depend
// on it, it is wired in by `tidemark dev up`).
type Scenarios interface {
	// List describes the scenarios in the order to offer them.
	List() []*devclusterv1.ScenarioInfo
	// Run plays the named scenario on the cluster whose launcher serves
	// the control API at control, dialled with o.Security(), sending its
	// timeline to emit (one call at a time). It returns when the scenario
	// has healed the cluster, also after ctx is cancelled.
	Run(ctx context.Context, name, control string, o Options, emit func(*devclusterv1.RunScenarioResponse)) error
}

// scenarioRuns lets one scenario run at a time, here or in a CLI that
// holds the slot (HoldScenario).
type scenarioRuns struct {
	mu      sync.Mutex
	running string
	// held: the running one is played by a CLI, not here.
	held bool
}

func (s *scenarioRuns) start(name string, held bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running != "" {
		where := ""
		if s.held {
			where = " in `tidemark scenario run`"
		}
		return status.Errorf(codes.FailedPrecondition,
			"scenario %s is running%s: one scenario at a time (cancel it, or wait for it to end)", s.running, where)
	}
	s.running, s.held = name, held
	return nil
}

func (s *scenarioRuns) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running, s.held = "", false
}

func (s *scenarioRuns) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func (s *controlService) ListScenarios(context.Context, *devclusterv1.ListScenariosRequest) (*devclusterv1.ListScenariosResponse, error) {
	sc := s.c.opts.Scenarios
	if sc == nil {
		return nil, status.Error(codes.Unimplemented, "this launcher plays no scenarios")
	}
	return &devclusterv1.ListScenariosResponse{Scenarios: sc.List(), Running: s.c.runs.current()}, nil
}

func (s *controlService) RunScenario(req *devclusterv1.RunScenarioRequest, stream devclusterv1.DevClusterService_RunScenarioServer) error {
	sc := s.c.opts.Scenarios
	if sc == nil {
		return status.Error(codes.Unimplemented, "this launcher plays no scenarios")
	}
	var names []string
	known := false
	for _, i := range sc.List() {
		names = append(names, i.GetName())
		known = known || i.GetName() == req.GetName()
	}
	if !known {
		return status.Errorf(codes.NotFound, "name: no scenario %q (scenarios: %s)", req.GetName(), strings.Join(names, ", "))
	}
	if err := s.c.runs.start(req.GetName(), false); err != nil {
		return err
	}
	defer s.c.runs.end()
	// The run goes on healing after the caller is gone; events it sends
	// then are dropped.
	var sendErr error
	finished := false
	last := int32(-1)
	emit := func(e *devclusterv1.RunScenarioResponse) {
		last = e.GetIndex()
		finished = e.GetKind() == devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED
		if sendErr == nil {
			sendErr = stream.Send(e)
		}
	}
	err := sc.Run(stream.Context(), req.GetName(), s.c.opts.ControlAddr, s.c.opts, emit)
	if err != nil && !finished && sendErr == nil {
		// The run failed before its timeline could end it (the cluster
		// unreachable): end it here.
		sendErr = stream.Send(&devclusterv1.RunScenarioResponse{Index: last + 1, Scenario: req.GetName(),
			Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED, Error: err.Error(),
			Text: "the run could not be carried out: " + err.Error()})
	}
	return sendErr
}

// HoldScenario takes the scenario slot for a run the caller plays itself,
// until the call ends (also when the caller's process dies: its
// connection goes with it).
func (s *controlService) HoldScenario(req *devclusterv1.HoldScenarioRequest, stream devclusterv1.DevClusterService_HoldScenarioServer) error {
	if s.c.opts.Scenarios == nil {
		return status.Error(codes.Unimplemented, "this launcher plays no scenarios")
	}
	if req.GetName() == "" {
		return status.Error(codes.InvalidArgument, "name: the scenario the caller plays is required")
	}
	if err := s.c.runs.start(req.GetName(), true); err != nil {
		return err
	}
	defer s.c.runs.end()
	if err := stream.Send(&devclusterv1.HoldScenarioResponse{}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

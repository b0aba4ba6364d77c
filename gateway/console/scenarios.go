package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"tidemark.io/services/platform/kerr"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// Scenarios: the learning note's playbooks, played by the dev launcher
// (DevClusterService.RunScenario: only it can kill and pause nodes). A run
// is started through the REST API (POST /v1/dev/scenarios/{name}:run, a
// stream of its timeline that cancels the run when closed); the gateway
// shows its events to FollowRun, and the console sends the run, whole, as
// the "scenario" event on every page's event stream at each new step, so
// every open page (and one opened later) shows the same timeline beside
// the live replica view.
//
//	GET  /console/api/scenarios   the scenarios and the current (or last) run

// listTimeout bounds the launcher's list of scenarios.
const listTimeout = 30 * time.Second

// scenarioInfo describes one scenario.
type scenarioInfo struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Note  string `json:"note"`
	Rule  string `json:"rule"`
}

// scenarioStep is one entry of a run's timeline.
type scenarioStep struct {
	Index int32 `json:"index"`
	// Kind is started, step, check or finished.
	Kind      string   `json:"kind"`
	Time      int64    `json:"time"`
	ElapsedMs int64    `json:"elapsedMs"`
	Text      string   `json:"text"`
	Check     string   `json:"check,omitempty"`
	Passed    bool     `json:"passed"`
	Failures  []string `json:"failures,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// scenarioRun is a run as the page draws it.
type scenarioRun struct {
	Scenario string `json:"scenario"`
	Topic    string `json:"topic,omitempty"`
	Rule     string `json:"rule,omitempty"`
	// Running is true until the launcher's stream ends.
	Running bool `json:"running"`
	// Cancelled says the run's caller went away before its end (which
	// cancels it).
	Cancelled bool           `json:"cancelled"`
	Steps     []scenarioStep `json:"steps"`
}

var scenarioKinds = map[devclusterv1.ScenarioEventKind]string{
	devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STARTED:  "started",
	devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STEP:     "step",
	devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_CHECK:    "check",
	devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED: "finished",
}

// scenarios holds the last run the gateway relayed.
type scenarios struct {
	mu  sync.Mutex
	run *scenarioRun // the current or last run
}

// runJSON is the current run as the "scenario" event's data (nil: none).
func (s *scenarios) runJSON() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return nil
	}
	return mustJSON(s.run)
}

func (c *Console) needLauncher() error {
	if c.opts.DevControl == "" {
		return refuse(kerr.PolicyViolation,
			"scenarios need the dev launcher's control address (--console.dev.control, e.g. 127.0.0.1:9299)")
	}
	return nil
}

// serveScenarios lists the launcher's scenarios and this console's run.
func (c *Console) serveScenarios(w http.ResponseWriter, r *http.Request) {
	list, err := c.listScenarios(r.Context())
	if err != nil {
		ae := toAPIError(err)
		writeError(w, ae.status, ae.body)
		return
	}
	c.scen.mu.Lock()
	run := c.scen.run
	var body []byte
	if run != nil {
		body = mustJSON(run)
	}
	c.scen.mu.Unlock()
	writeJSON(w, http.StatusOK, struct {
		Scenarios []scenarioInfo `json:"scenarios"`
		// Running is what the launcher runs now, started here or not.
		Running string  `json:"running,omitempty"`
		Run     jsonRaw `json:"run"`
	}{list.Scenarios, list.Running, jsonRaw(body)})
}

// jsonRaw is pre-encoded JSON (null when empty).
type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return j, nil
}

type scenarioList struct {
	Scenarios []scenarioInfo
	Running   string
}

func (c *Console) listScenarios(ctx context.Context) (scenarioList, error) {
	if err := c.needLauncher(); err != nil {
		return scenarioList{}, err
	}
	dc, err := c.devClient()
	if err != nil {
		return scenarioList{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	resp, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
	if err != nil {
		return scenarioList{}, devError(err)
	}
	out := scenarioList{Scenarios: []scenarioInfo{}, Running: resp.GetRunning()}
	for _, s := range resp.GetScenarios() {
		out.Scenarios = append(out.Scenarios, scenarioInfo{Name: s.GetName(), Title: s.GetTitle(), Note: s.GetNote(), Rule: s.GetRule()})
	}
	return out, nil
}

// FollowRun starts following a run of name that the gateway relays: step
// gets each of its events, end its end (cancelled: its caller went away,
// which cancels it). The run replaces the last one on every page.
func (c *Console) FollowRun(name string) (step func(*devclusterv1.RunScenarioResponse), end func(err error, cancelled bool)) {
	run := &scenarioRun{Scenario: name, Running: true}
	c.scen.mu.Lock()
	c.scen.run = run
	c.scen.mu.Unlock()
	return func(e *devclusterv1.RunScenarioResponse) { c.addStep(run, e) },
		func(err error, cancelled bool) { c.endRun(run, err, cancelled) }
}

// Refresh asks for a new picture at once, after a node action or a fault.
func (c *Console) Refresh() { c.hub.refresh() }

// addStep appends e to run and sends the run to every page.
func (c *Console) addStep(run *scenarioRun, e *devclusterv1.RunScenarioResponse) {
	c.scen.mu.Lock()
	if e.GetTopic() != "" {
		run.Topic = e.GetTopic()
	}
	if e.GetRule() != "" {
		run.Rule = e.GetRule()
	}
	run.Steps = append(run.Steps, scenarioStep{Index: e.GetIndex(), Kind: scenarioKinds[e.GetKind()], Time: e.GetTimeUnixMs(),
		ElapsedMs: e.GetElapsedMs(), Text: e.GetText(), Check: e.GetCheck(), Passed: e.GetPassed(),
		Failures: e.GetFailures(), Error: e.GetError()})
	data := mustJSON(run)
	c.scen.mu.Unlock()
	c.hub.broadcast(message{"scenario", data})
}

// endRun marks run ended; a stream that broke before the launcher's
// verdict gets a last step saying so.
func (c *Console) endRun(run *scenarioRun, err error, cancelled bool) {
	c.scen.mu.Lock()
	run.Running = false
	run.Cancelled = cancelled
	n := len(run.Steps)
	if n == 0 || run.Steps[n-1].Kind != "finished" {
		msg := "the gateway lost the run's stream: " + err.Error()
		if errors.Is(err, io.EOF) {
			msg = "the run's stream ended without a verdict"
		} else if run.Cancelled {
			msg = "cancelled; the launcher heals the cluster"
		}
		last := scenarioStep{Index: int32(n), Kind: "finished", Text: msg, Error: msg}
		if n > 0 {
			last.Time, last.ElapsedMs = run.Steps[n-1].Time, run.Steps[n-1].ElapsedMs
		}
		run.Steps = append(run.Steps, last)
	}
	data := mustJSON(run)
	c.scen.mu.Unlock()
	c.hub.broadcast(message{"scenario", data})
	c.hub.refresh()
}

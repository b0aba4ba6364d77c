package console_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"tidemark.io/gateway"
	"tidemark.io/gateway/internal/resterr"
)

type scenarioRunView struct {
	Scenario  string `json:"scenario"`
	Topic     string `json:"topic"`
	Rule      string `json:"rule"`
	Running   bool   `json:"running"`
	Cancelled bool   `json:"cancelled"`
	Steps     []struct {
		Index  int32  `json:"index"`
		Kind   string `json:"kind"`
		Text   string `json:"text"`
		Check  string `json:"check"`
		Passed bool   `json:"passed"`
		Error  string `json:"error"`
	} `json:"steps"`
}

// nextRun waits for a "scenario" event for which cond holds.
func (s *sseStream) nextRun(timeout time.Duration, what string, cond func(*scenarioRunView) bool) *scenarioRunView {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			s.t.Fatalf("no scenario event with %s within %s", what, timeout)
		}
		ev := s.next("scenario", left)
		var run scenarioRunView
		if err := json.Unmarshal(ev.data, &run); err != nil {
			s.t.Fatalf("scenario event: %v in %s", err, ev.data)
		}
		if cond(&run) {
			return &run
		}
	}
}

func getScenarios(t *testing.T, base string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(base + "/console/api/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// startRun starts a run as the page's Run button does (POST
// /v1/dev/scenarios/NAME:run, a stream of the run's events): on success it
// returns the first event and the stream, whose closing cancels the run; on
// a refusal, the error body.
func startRun(t *testing.T, base, name string) (int, apiErr, map[string]any, io.Closer) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/dev/scenarios/"+name+":run", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var e apiErr
		if err := json.Unmarshal(raw, &e); err != nil || e.Name == "" {
			t.Fatalf("run %s: %d with a body that is not an error object: %s", name, resp.StatusCode, raw)
		}
		if err := resterr.CheckShape(raw); err != nil {
			t.Errorf("run %s: %v", name, err)
		}
		return resp.StatusCode, e, nil, nil
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	var first struct{ Result map[string]any }
	if err != nil || json.Unmarshal(line, &first) != nil || first.Result == nil {
		resp.Body.Close()
		t.Fatalf("run %s: first line %q, %v", name, line, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp.StatusCode, apiErr{}, first.Result, resp.Body
}

// A scenario run through the REST API, as the page's Run button does: the
// launcher's list, the run's steps on every page's event stream, one run
// at a time (a second run is a 409 naming the running one), cancel by
// closing the run's stream, and a run to its verdict.
func TestScenarioFromConsole(t *testing.T) {
	scen := newFakeScenarios()
	dev := serveDevClusterWith(t, nil, scen)
	base := serveGateway(t, nil, gateway.ConsoleOptions{Actions: true, DevControl: dev})

	code, raw := getScenarios(t, base)
	var list struct {
		Scenarios []struct{ Name, Title, Note, Rule string }
		Run       *scenarioRunView
	}
	if err := json.Unmarshal(raw, &list); err != nil || code != http.StatusOK || len(list.Scenarios) != 2 ||
		list.Scenarios[0].Name != "walk" || list.Scenarios[0].Note != "§3.3" || list.Scenarios[0].Title == "" || list.Run != nil {
		t.Fatalf("GET scenarios: %d %s; want walk (§3.3) and lag, no run", code, raw)
	}

	s := openSSE(t, base)
	var hello struct{ Scenarios bool }
	if err := json.Unmarshal(s.next("hello", 5*time.Second).data, &hello); err != nil || !hello.Scenarios {
		t.Fatalf("hello does not offer scenarios: %v", err)
	}

	code, e, first, stream := startRun(t, base, "walk")
	if code != http.StatusOK || first["scenario"] != "walk" || first["topic"] != "scenario-walk-1" || first["kind"] != "SCENARIO_EVENT_KIND_STARTED" {
		t.Fatalf("run walk: %d %+v %+v", code, e, first)
	}
	run := s.nextRun(5*time.Second, "the walk's step and check", func(r *scenarioRunView) bool { return len(r.Steps) == 3 })
	if run.Scenario != "walk" || !run.Running || run.Topic != "scenario-walk-1" || run.Rule == "" ||
		run.Steps[0].Kind != "started" || run.Steps[1].Kind != "step" || run.Steps[1].Text != "step ①: produced m0, m1" ||
		run.Steps[2].Kind != "check" || !run.Steps[2].Passed || run.Steps[2].Check != "the topic led with its full ISR" {
		t.Fatalf("the run as the page sees it: %+v", run)
	}
	// A page opened now gets the run too.
	late := openSSE(t, base)
	late.nextRun(5*time.Second, "the run so far", func(r *scenarioRunView) bool { return r.Scenario == "walk" && len(r.Steps) == 3 })

	// One at a time: the launcher's refusal, by name.
	code, e, _, _ = startRun(t, base, "lag")
	if code != http.StatusConflict || e.Name != "FAILED_PRECONDITION" || !strings.Contains(e.Message, "scenario walk is running") {
		t.Fatalf("a second run: %d %+v; want 409 naming walk", code, e)
	}
	code, e, _, _ = startRun(t, base, "no-such")
	if code != http.StatusNotFound || !strings.Contains(e.Message, `no scenario "no-such"`) {
		t.Fatalf("an unknown scenario: %d %+v; want 404 naming it", code, e)
	}

	// Cancel: closing the stream cancels the launcher's call; the run ends
	// saying so.
	_ = stream.Close()
	select {
	case <-scen.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the launcher's run was not cancelled")
	}
	run = s.nextRun(5*time.Second, "the run ended", func(r *scenarioRunView) bool { return !r.Running })
	if last := run.Steps[len(run.Steps)-1]; !run.Cancelled || last.Kind != "finished" || last.Passed ||
		!strings.Contains(last.Error, "cancelled") {
		t.Fatalf("the cancelled run: %+v", run)
	}

	// A run to its verdict; the launcher is free again once the first
	// one's call has ended.
	close(scen.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, e, _, stream = startRun(t, base, "walk")
		if code == http.StatusOK {
			break
		}
		if code != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("run walk again: %d %+v", code, e)
		}
		time.Sleep(20 * time.Millisecond)
	}
	run = s.nextRun(5*time.Second, "the second run's verdict", func(r *scenarioRunView) bool { return !r.Running && !r.Cancelled })
	if last := run.Steps[len(run.Steps)-1]; len(run.Steps) != 4 || last.Kind != "finished" || !last.Passed || last.Text != "as the note says" {
		t.Fatalf("the finished run: %+v", run)
	}
	code, raw = getScenarios(t, base)
	if err := json.Unmarshal(raw, &list); err != nil || code != http.StatusOK || list.Run == nil || list.Run.Running || len(list.Run.Steps) != 4 {
		t.Fatalf("GET scenarios after the run: %d %s; want the last run", code, raw)
	}
	_ = stream.Close()
}

// Scenarios need the dev launcher and actions enabled.
func TestScenariosRefused(t *testing.T) {
	base := serveGateway(t, nil, gateway.ConsoleOptions{Actions: true})
	code, e, _, _ := startRun(t, base, "walk")
	if code != http.StatusForbidden || e.Name != "POLICY_VIOLATION" || !strings.Contains(e.Message, "--console.dev.control") {
		t.Fatalf("run without a launcher: %d %+v", code, e)
	}
	if code, raw := getScenarios(t, base); code != http.StatusForbidden || !strings.Contains(string(raw), "--console.dev.control") {
		t.Fatalf("list without a launcher: %d %s", code, raw)
	}

	base2 := serveGateway(t, nil, gateway.ConsoleOptions{DevControl: "127.0.0.1:1"})
	code, e, _, _ = startRun(t, base2, "walk")
	if code != http.StatusForbidden || !strings.Contains(e.Message, "--console.actions") {
		t.Fatalf("run with actions disabled: %d %+v", code, e)
	}
}

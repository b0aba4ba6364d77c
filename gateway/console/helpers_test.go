package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/gateway"
	"tidemark.io/gateway/internal/resterr"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

// testCluster is an in-process cluster whose brokers serve the fault
// injection API and drop a silent follower from the ISR after 2 s.
type testCluster struct {
	*clustertest.Cluster
	controllers []string
	brokers     []string
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	tc := &testCluster{}
	var mu sync.Mutex
	tc.Cluster = clustertest.Start(t, clustertest.Options{
		BrokerSettings: map[string]string{"replica.lag.time.max.ms": "2000"},
		Adjust:         func(cfg *broker.Config) { cfg.FaultInjection = true },
		AdjustController: func(cfg *controller.Config) {
			mu.Lock()
			defer mu.Unlock()
			tc.controllers = append(tc.controllers, cfg.Listen)
		},
	})
	for id := int32(1); id <= 3; id++ {
		tc.brokers = append(tc.brokers, tc.BrokerConfig(id).Listen)
	}
	return tc
}

// serveGateway runs a gateway on a loopback port: the REST API under /v1,
// which the console's buttons call, and the console at /. With tc nil the
// cluster cannot be reached (127.0.0.1:1). It returns the base URL.
func serveGateway(t *testing.T, tc *testCluster, co gateway.ConsoleOptions) string {
	t.Helper()
	o := gateway.DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.TLS = tlsconf.Plain()
	o.Controllers, o.Brokers = config.StringList{"127.0.0.1:1"}, config.StringList{"127.0.0.1:1"}
	if tc != nil {
		o.Controllers, o.Brokers = config.StringList(tc.controllers), config.StringList(tc.brokers)
	}
	o.Console = co
	g, err := gateway.Start(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Stop(ctx); err != nil {
			t.Errorf("stop gateway: %v", err)
		}
	})
	return "http://" + g.Addr()
}

// --- the JSON the console sends (the fields the tests look at) ---

type snapshot struct {
	Time       int64 `json:"time"`
	Controller struct {
		ID    int32 `json:"id"`
		Epoch int32 `json:"epoch"`
	} `json:"controller"`
	Brokers []struct {
		ID      int32  `json:"id"`
		State   string `json:"state"`
		Alive   bool   `json:"alive"`
		Epoch   int64  `json:"epoch"`
		Process string `json:"process"`
		Faults  []struct {
			Stall bool `json:"stall"`
		} `json:"faults"`
	} `json:"brokers"`
	Topics []struct {
		Name    string `json:"name"`
		MinISR  int32  `json:"minIsr"`
		Unclean *bool  `json:"unclean"`
	} `json:"topics"`
	Partitions []partition `json:"partitions"`
}

type partition struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	MinISR      int32   `json:"minIsr"`
	HW          int64   `json:"hw"`
	UnderMinISR bool    `json:"underMinIsr"`
	Views       []struct {
		Broker int32 `json:"broker"`
		Alive  bool  `json:"alive"`
		InISR  bool  `json:"inIsr"`
		Leader bool  `json:"leader"`
		LEO    int64 `json:"leo"`
		HW     int64 `json:"hw"`
		// LeaderLEO is a follower's LEO as its leader knows it.
		LeaderLEO *int64 `json:"leaderLeo"`
		Fault     *struct {
			Stall bool `json:"stall"`
		} `json:"fault"`
	} `json:"views"`
}

func (s *snapshot) partition(topic string, p int32) *partition {
	for i := range s.Partitions {
		if s.Partitions[i].Topic == topic && s.Partitions[i].Partition == p {
			return &s.Partitions[i]
		}
	}
	return nil
}

func (s *snapshot) brokerState(id int32) string {
	for _, b := range s.Brokers {
		if b.ID == id {
			return b.State
		}
	}
	return ""
}

type apiErr struct {
	Code    int    `json:"code"`
	Name    string `json:"name"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

// --- Server-Sent Events ---

type sseEvent struct {
	name string
	data []byte
}

// sseStream reads /console/events.
type sseStream struct {
	t      *testing.T
	events chan sseEvent
	cancel context.CancelFunc
	cur    map[string]any // the view folded from snapshot and patches
}

func openSSE(t *testing.T, base string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/console/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		cancel()
		t.Fatalf("events: status %d, content type %q", resp.StatusCode, ct)
	}
	s := &sseStream{t: t, events: make(chan sseEvent, 1024), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 1<<20), 8<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = []byte(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

// next returns the next event called name, failing after timeout.
func (s *sseStream) next(name string, timeout time.Duration) sseEvent {
	s.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("event stream ended waiting for %q", name)
			}
			if ev.name == name {
				return ev
			}
		case <-deadline:
			s.t.Fatalf("no %q event within %s", name, timeout)
		}
	}
}

// waitSnapshot returns the first snapshot for which cond holds.
func (s *sseStream) waitSnapshot(timeout time.Duration, what string, cond func(*snapshot) bool) *snapshot {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last *snapshot
	for {
		left := time.Until(deadline)
		if left <= 0 {
			s.t.Fatalf("no snapshot with %s within %s; last: %s", what, timeout, describe(last))
		}
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("event stream ended waiting for %s", what)
			}
			if ev.name != "snapshot" && ev.name != "patch" {
				continue
			}
			var snap snapshot
			if err := json.Unmarshal(s.view(ev), &snap); err != nil {
				s.t.Fatalf("snapshot JSON: %v", err)
			}
			last = &snap
			if cond(&snap) {
				return &snap
			}
		case <-time.After(left):
		}
	}
}

func describe(s *snapshot) string {
	if s == nil {
		return "none"
	}
	var b strings.Builder
	for _, br := range s.Brokers {
		fmt.Fprintf(&b, "B%d=%s ", br.ID, br.State)
	}
	for _, p := range s.Partitions {
		fmt.Fprintf(&b, "%s-%d leader %d isr %v hw %d; ", p.Topic, p.Partition, p.Leader, p.ISR, p.HW)
	}
	return b.String()
}

// --- actions ---

// post calls a REST route with a JSON body and decodes the answer into out
// (when given); a refusal must be the one REST error body.
func post(t *testing.T, base, path string, body any, out any) (int, apiErr) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("POST %s: content type %q, body %s", path, ct, raw)
	}
	var e apiErr
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &e); err != nil || e.Name == "" {
			t.Fatalf("POST %s: status %d with a body that is not an error object: %s", path, resp.StatusCode, raw)
		}
		if err := resterr.CheckShape(raw); err != nil {
			t.Errorf("POST %s: %v", path, err)
		}
		return resp.StatusCode, e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: %v in %s", path, err, raw)
		}
	}
	return resp.StatusCode, e
}

// --- a DevClusterService over the in-process cluster ---

type devCluster struct {
	devclusterv1.UnimplementedDevClusterServiceServer
	c       *testCluster
	mu      sync.Mutex
	stopped map[int32]devclusterv1.NodeState
	// stopping lists the brokers shown STOPPING: a graceful stop under
	// way, their process alive.
	stopping map[int32]bool
	scen     *fakeScenarios
}

// fakeScenarios plays "walk": started, a step and a check, then it waits
// for release (and ends as the note says) or for its call to be cancelled
// (and closes cancelled). One run at a time, as the launcher.
type fakeScenarios struct {
	mu        sync.Mutex
	running   string
	release   chan struct{}
	cancelled chan struct{}
}

func newFakeScenarios() *fakeScenarios {
	return &fakeScenarios{release: make(chan struct{}), cancelled: make(chan struct{})}
}

var fakeScenarioList = []*devclusterv1.ScenarioInfo{
	{Name: "walk", Title: "the HW walks after the followers' next fetch", Note: "§3.3", Rule: "HW is the min LEO of the ISR"},
	{Name: "lag", Title: "a stalled follower leaves the ISR", Note: "§7.1", Rule: "replica.lag.time.max.ms"},
}

func (d *devCluster) ListScenarios(context.Context, *devclusterv1.ListScenariosRequest) (*devclusterv1.ListScenariosResponse, error) {
	d.scen.mu.Lock()
	defer d.scen.mu.Unlock()
	return &devclusterv1.ListScenariosResponse{Scenarios: fakeScenarioList, Running: d.scen.running}, nil
}

func (d *devCluster) RunScenario(req *devclusterv1.RunScenarioRequest, stream devclusterv1.DevClusterService_RunScenarioServer) error {
	f := d.scen
	if !slices.ContainsFunc(fakeScenarioList, func(i *devclusterv1.ScenarioInfo) bool { return i.GetName() == req.GetName() }) {
		return status.Errorf(codes.NotFound, "name: no scenario %q (scenarios: walk, lag)", req.GetName())
	}
	f.mu.Lock()
	if f.running != "" {
		defer f.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "scenario %s is running: one scenario at a time (cancel it, or wait for it to end)", f.running)
	}
	f.running = req.GetName()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running = ""
		f.mu.Unlock()
	}()
	i := int32(0)
	send := func(e *devclusterv1.RunScenarioResponse) error {
		e.Index, e.Scenario, e.TimeUnixMs, e.ElapsedMs = i, req.GetName(), time.Now().UnixMilli(), int64(i)*100
		i++
		return stream.Send(e)
	}
	for _, e := range []*devclusterv1.RunScenarioResponse{
		{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STARTED, Text: "the walk", Topic: "scenario-walk-1", Rule: "HW is the min LEO of the ISR"},
		{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STEP, Text: "step ①: produced m0, m1"},
		{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_CHECK, Check: "the topic led with its full ISR", Passed: true},
	} {
		if err := send(e); err != nil {
			return err
		}
	}
	select {
	case <-f.release:
		return send(&devclusterv1.RunScenarioResponse{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED, Passed: true, Text: "as the note says"})
	case <-stream.Context().Done():
		close(f.cancelled)
		return stream.Context().Err()
	}
}

// serveDevCluster serves the launcher API for the cluster's brokers on a
// loopback port and returns its address.
func serveDevCluster(t *testing.T, tc *testCluster) string {
	t.Helper()
	return serveDevClusterWith(t, tc, newFakeScenarios())
}

// serveDevClusterWith is serveDevCluster with the given fake scenarios.
func serveDevClusterWith(t *testing.T, tc *testCluster, scen *fakeScenarios) string {
	t.Helper()
	addr, _ := serveFakeLauncher(t, tc, scen)
	return addr
}

// serveFakeLauncher is serveDevClusterWith that also returns the launcher,
// for a test to set the states it reports.
func serveFakeLauncher(t *testing.T, tc *testCluster, scen *fakeScenarios) (string, *devCluster) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	d := &devCluster{c: tc, stopped: map[int32]devclusterv1.NodeState{}, stopping: map[int32]bool{}, scen: scen}
	devclusterv1.RegisterDevClusterServiceServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), d
}

func (d *devCluster) node(id int32) *devclusterv1.DevNode {
	n := &devclusterv1.DevNode{Name: clustertest.BrokerName(id), Kind: "broker", Id: id,
		Address: d.c.BrokerConfig(id).Listen, State: devclusterv1.NodeState_NODE_STATE_RUNNING}
	if d.stopping[id] {
		n.State = devclusterv1.NodeState_NODE_STATE_STOPPING
		return n
	}
	if d.c.Broker(id) == nil {
		n.State = devclusterv1.NodeState_NODE_STATE_EXITED
		if st, ok := d.stopped[id]; ok {
			n.State = st
		}
	}
	return n
}

func (d *devCluster) ListNodes(context.Context, *devclusterv1.ListNodesRequest) (*devclusterv1.ListNodesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := &devclusterv1.ListNodesResponse{}
	if d.c == nil {
		return out, nil // scenarios only
	}
	for id := int32(1); id <= 3; id++ {
		out.Nodes = append(out.Nodes, d.node(id))
	}
	return out, nil
}

func (d *devCluster) NodeAction(_ context.Context, req *devclusterv1.NodeActionRequest) (*devclusterv1.NodeActionResponse, error) {
	id64, err := strconv.ParseInt(strings.TrimPrefix(req.GetName(), "broker-"), 10, 32)
	id := int32(id64)
	if err != nil || !strings.HasPrefix(req.GetName(), "broker-") || id < 1 || id > 3 {
		return nil, status.Errorf(codes.NotFound, "no node %q", req.GetName())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	running := d.c.Broker(id) != nil
	switch req.GetAction() {
	case devclusterv1.Action_ACTION_KILL:
		if !running {
			return nil, status.Errorf(codes.FailedPrecondition, "%s is not running", req.GetName())
		}
		d.c.CrashBroker(id)
		d.stopped[id] = devclusterv1.NodeState_NODE_STATE_EXITED
	case devclusterv1.Action_ACTION_STOP:
		if !running {
			return nil, status.Errorf(codes.FailedPrecondition, "%s is not running", req.GetName())
		}
		if err := d.c.StopBroker(id); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		d.stopped[id] = devclusterv1.NodeState_NODE_STATE_STOPPED
	case devclusterv1.Action_ACTION_START:
		if running {
			return nil, status.Errorf(codes.FailedPrecondition, "%s is already running", req.GetName())
		}
		d.c.StartBroker(id)
	case devclusterv1.Action_ACTION_RESTART:
		if running {
			if err := d.c.StopBroker(id); err != nil {
				return nil, status.Error(codes.FailedPrecondition, err.Error())
			}
		}
		d.c.StartBroker(id)
	default:
		return nil, status.Errorf(codes.Unimplemented, "%v is not supported by the in-process cluster", req.GetAction())
	}
	return &devclusterv1.NodeActionResponse{Node: d.node(id)}, nil
}

func contains(s []int32, v int32) bool { return slices.Contains(s, v) }

// view folds a snapshot or patch event into the stream's current view, as
// the page's applyPatch does, and returns the view as JSON.
func (s *sseStream) view(ev sseEvent) []byte {
	s.t.Helper()
	if ev.name == "snapshot" {
		s.cur = nil
		if err := json.Unmarshal(ev.data, &s.cur); err != nil {
			s.t.Fatalf("snapshot JSON: %v", err)
		}
		return ev.data
	}
	var p map[string]any
	if err := json.Unmarshal(ev.data, &p); err != nil {
		s.t.Fatalf("patch JSON: %v", err)
	}
	if s.cur == nil {
		s.cur = map[string]any{"partitions": []any{}}
	}
	for k, v := range p {
		if k != "partitions" && k != "removed" {
			s.cur[k] = v
		}
	}
	key := func(x any) string {
		m := x.(map[string]any)
		return fmt.Sprintf("%v/%v", m["topic"], m["partition"])
	}
	parts, _ := s.cur["partitions"].([]any)
	byKey := map[string]any{}
	for _, x := range parts {
		byKey[key(x)] = x
	}
	removed, _ := p["removed"].([]any)
	for _, k := range removed {
		delete(byKey, k.(string))
	}
	changed, _ := p["partitions"].([]any)
	for _, x := range changed {
		byKey[key(x)] = x
	}
	all := make([]any, 0, len(byKey))
	for _, x := range byKey {
		all = append(all, x)
	}
	slices.SortFunc(all, func(a, b any) int {
		am, bm := a.(map[string]any), b.(map[string]any)
		if c := strings.Compare(am["topic"].(string), bm["topic"].(string)); c != 0 {
			return c
		}
		return int(am["partition"].(float64) - bm["partition"].(float64))
	})
	s.cur["partitions"] = all
	out, err := json.Marshal(s.cur)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

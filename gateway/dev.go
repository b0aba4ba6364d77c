package gateway

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/gateway/internal/resterr"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/kerr"
)

// Timeouts of the dev launcher's calls: a graceful stop may take 30 s; a
// scenario's run answers once it has begun (its first event).
const (
	nodeActionTimeout = 45 * time.Second
	runStartTimeout   = 30 * time.Second
)

// devObserver is told what the demonstration routes did, so the console
// shows it on every page: a node action or fault (a new picture is due)
// and each run of a scenario.
type devObserver interface {
	Refresh()
	// FollowRun is called when a run of name began; step gets each of its
	// events, end its end (cancelled: its caller went away).
	FollowRun(name string) (step func(*devclusterv1.RunScenarioResponse), end func(err error, cancelled bool))
}

// demoGate refuses the demonstration routes (fault injection, the dev
// launcher) unless the console's actions are on, as the console's own
// buttons are.
type demoGate struct{ enabled bool }

func (g demoGate) check() error {
	if !g.enabled {
		return kerr.New(kerr.PolicyViolation, "console actions are disabled; the gateway enables them with --console.actions")
	}
	return nil
}

// devService is the DevClusterServiceClient behind /v1/dev/...: the dev
// launcher at --console.dev.control, called as the REST user.
type devService struct {
	gate  demoGate
	addr  string
	conns *connpool.Pool
	obs   devObserver
}

var _ devclusterv1.DevClusterServiceClient = devService{}

func (d devService) client() (devclusterv1.DevClusterServiceClient, error) {
	if err := d.gate.check(); err != nil {
		return nil, err
	}
	if d.addr == "" {
		return nil, kerr.New(kerr.PolicyViolation,
			"the dev launcher's control address is not set (--console.dev.control, e.g. 127.0.0.1:9299)")
	}
	cc, err := d.conns.Get(d.addr)
	if errors.Is(err, connpool.ErrClosed) {
		return nil, errStopped
	}
	if err != nil {
		return nil, err
	}
	return devclusterv1.NewDevClusterServiceClient(cc), nil
}

func (d devService) ListNodes(ctx context.Context, req *devclusterv1.ListNodesRequest, opts ...grpc.CallOption) (*devclusterv1.ListNodesResponse, error) {
	dc, err := d.client()
	if err != nil {
		return nil, err
	}
	resp, err := dc.ListNodes(ctx, req, opts...)
	return resp, launcherError(err)
}

func (d devService) NodeAction(ctx context.Context, req *devclusterv1.NodeActionRequest, opts ...grpc.CallOption) (*devclusterv1.NodeActionResponse, error) {
	dc, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, nodeActionTimeout)
	defer cancel()
	resp, err := dc.NodeAction(ctx, req, opts...)
	d.obs.Refresh()
	return resp, launcherError(err)
}

func (d devService) ListScenarios(ctx context.Context, req *devclusterv1.ListScenariosRequest, opts ...grpc.CallOption) (*devclusterv1.ListScenariosResponse, error) {
	dc, err := d.client()
	if err != nil {
		return nil, err
	}
	resp, err := dc.ListScenarios(ctx, req, opts...)
	return resp, launcherError(err)
}

// HoldScenario is for `tidemark scenario run`, which plays in its own
// process; REST has no route to it.
func (d devService) HoldScenario(context.Context, *devclusterv1.HoldScenarioRequest, ...grpc.CallOption) (devclusterv1.DevClusterService_HoldScenarioClient, error) {
	return nil, status.Error(codes.Unimplemented, "holding the scenario slot is not served over REST")
}

// RunScenario waits for the run's first event, so that a refusal (no such
// scenario, one already running) is the answer's HTTP status rather than
// a line in a 200 stream, then relays the run and tells the observer.
func (d devService) RunScenario(ctx context.Context, req *devclusterv1.RunScenarioRequest, opts ...grpc.CallOption) (devclusterv1.DevClusterService_RunScenarioClient, error) {
	dc, err := d.client()
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	late := time.AfterFunc(runStartTimeout, cancel)
	stream, err := dc.RunScenario(runCtx, req, opts...)
	var first *devclusterv1.RunScenarioResponse
	if err == nil {
		first, err = stream.Recv()
	}
	if !late.Stop() {
		cancel()
		return nil, kerr.New(kerr.RequestTimedOut, "dev launcher: scenario %s did not begin within %s", req.GetName(), runStartTimeout)
	}
	if err != nil {
		cancel()
		if errors.Is(err, io.EOF) {
			return nil, kerr.New(kerr.UnknownServerError, "dev launcher: scenario %s ended before it began", req.GetName())
		}
		return nil, launcherError(err)
	}
	step, end := d.obs.FollowRun(req.GetName())
	step(first)
	r := &relayedRun{DevClusterService_RunScenarioClient: stream, first: first, step: step}
	r.finish = func(err error, cancelled bool) {
		r.once.Do(func() {
			r.ended.Store(true)
			cancel()
			end(err, cancelled)
		})
	}
	// The request's end ends the run too, even if grpc-gateway stops
	// reading before the launcher's stream ends (the caller went away).
	context.AfterFunc(ctx, func() { r.finish(ctx.Err(), true) })
	return r, nil
}

// relayedRun is a run's stream as grpc-gateway reads it: the first event
// (already received), then the launcher's, each shown to the observer.
type relayedRun struct {
	devclusterv1.DevClusterService_RunScenarioClient
	first  *devclusterv1.RunScenarioResponse
	step   func(*devclusterv1.RunScenarioResponse)
	once   sync.Once
	ended  atomic.Bool                     // finish ran: later events are not the run's
	finish func(err error, cancelled bool) // the run's end, once; cancels its call
}

func (r *relayedRun) Recv() (*devclusterv1.RunScenarioResponse, error) {
	if r.first != nil {
		e := r.first
		r.first = nil
		return e, nil
	}
	e, err := r.DevClusterService_RunScenarioClient.Recv()
	if err != nil {
		r.finish(err, status.Code(err) == codes.Canceled)
		return nil, err
	}
	if !r.ended.Load() {
		r.step(e)
	}
	return e, nil
}

// launcherStatus is a dev launcher's refusal as resterr.Launcher renders it.
type launcherStatus struct {
	status int
	body   errorBody
}

func (e *launcherStatus) Error() string { return e.body.Name + ": " + e.body.Message }

// launcherError keeps a launcher's plain gRPC status for the error handler
// (resterr.Launcher); tidemark's own refusals pass as they are.
func launcherError(err error) error {
	if st, body, ok := resterr.Launcher(err); ok {
		return &launcherStatus{status: st, body: body}
	}
	return err
}

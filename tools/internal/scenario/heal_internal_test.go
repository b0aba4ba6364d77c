package scenario

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// stoppingLauncher is a launcher whose broker-1 is STOPPING for its first
// lists (a stop in flight from a console page), then STOPPED, and which
// refuses to start it before, as the launcher does.
type stoppingLauncher struct {
	devclusterv1.DevClusterServiceClient
	mu       sync.Mutex
	lists    int
	stopping int
	actions  []devclusterv1.Action
}

func (l *stoppingLauncher) state() devclusterv1.NodeState {
	if l.lists <= l.stopping {
		return devclusterv1.NodeState_NODE_STATE_STOPPING
	}
	return devclusterv1.NodeState_NODE_STATE_STOPPED
}

func (l *stoppingLauncher) ListNodes(context.Context, *devclusterv1.ListNodesRequest, ...grpc.CallOption) (*devclusterv1.ListNodesResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lists++
	return &devclusterv1.ListNodesResponse{Nodes: []*devclusterv1.DevNode{{Name: "broker-1", State: l.state(), Pid: 42}}}, nil
}

func (l *stoppingLauncher) NodeAction(_ context.Context, req *devclusterv1.NodeActionRequest, _ ...grpc.CallOption) (*devclusterv1.NodeActionResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state() == devclusterv1.NodeState_NODE_STATE_STOPPING {
		return nil, errors.New("broker-1 is still stopping")
	}
	l.actions = append(l.actions, req.GetAction())
	return &devclusterv1.NodeActionResponse{Node: &devclusterv1.DevNode{Name: req.GetName()}}, nil
}

// Healing a node caught in a graceful stop waits for the stop to end and
// then starts it, rather than leaving it down (STOPPING is neither running
// nor stopped).
func TestHealWaitsForAStopInFlightThenStartsTheNode(t *testing.T) {
	l := &stoppingLauncher{stopping: 3}
	r := &run{ctx: context.Background(), o: Options{Out: io.Discard}, dev: l}
	r.touched.node("broker-1")
	if err := r.heal(); err != nil {
		t.Fatalf("heal: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.actions) != 1 || l.actions[0] != devclusterv1.Action_ACTION_START {
		t.Errorf("heal's actions on broker-1: %v, want one start after its stop ended", l.actions)
	}
}

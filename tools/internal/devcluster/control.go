package devcluster

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// controlService serves DevClusterService for `tidemark dev <action> <node>`
// and for the web console.
type controlService struct {
	devclusterv1.UnimplementedDevClusterServiceServer
	c *Cluster
}

func (s *controlService) ListNodes(context.Context, *devclusterv1.ListNodesRequest) (*devclusterv1.ListNodesResponse, error) {
	out := &devclusterv1.ListNodesResponse{Nodes: []*devclusterv1.DevNode{s.c.etcdProto()}}
	for _, n := range s.c.nodes {
		out.Nodes = append(out.Nodes, n.Proto())
	}
	return out, nil
}

func (s *controlService) NodeAction(ctx context.Context, req *devclusterv1.NodeActionRequest) (*devclusterv1.NodeActionResponse, error) {
	if req.GetName() == EtcdNode {
		return s.etcdAction(ctx, req)
	}
	n, err := s.c.Node(req.GetName())
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	// One action at a time keeps start/stop races out of the launcher.
	extra := req.GetExtraArgs()
	if act := req.GetAction(); len(extra) > 0 && act != devclusterv1.Action_ACTION_START && act != devclusterv1.Action_ACTION_RESTART {
		return nil, status.Errorf(codes.InvalidArgument, "extra_args: only a start or restart takes extra arguments, not %v", act)
	}
	for i, a := range extra {
		if strings.TrimSpace(a) == "" {
			return nil, status.Errorf(codes.InvalidArgument, "extra_args[%d]: empty argument", i)
		}
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	switch req.GetAction() {
	case devclusterv1.Action_ACTION_STOP:
		err = n.Stop(30 * time.Second)
	case devclusterv1.Action_ACTION_KILL:
		err = n.Kill()
	case devclusterv1.Action_ACTION_PAUSE:
		err = n.Pause()
	case devclusterv1.Action_ACTION_RESUME:
		err = n.Resume()
	case devclusterv1.Action_ACTION_START:
		err = n.StartWith(extra)
	case devclusterv1.Action_ACTION_RESTART:
		if _, _, rerr := n.running(); rerr == nil {
			if err = n.Stop(30 * time.Second); err != nil {
				break
			}
		}
		err = n.StartWith(extra)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "action: unknown action %v", req.GetAction())
	}
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &devclusterv1.NodeActionResponse{Node: n.Proto()}, nil
}

func (s *controlService) etcdAction(ctx context.Context, req *devclusterv1.NodeActionRequest) (*devclusterv1.NodeActionResponse, error) {
	if len(req.GetExtraArgs()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "extra_args: etcd runs inside the launcher and takes no arguments")
	}
	switch req.GetAction() {
	case devclusterv1.Action_ACTION_STOP, devclusterv1.Action_ACTION_START, devclusterv1.Action_ACTION_RESTART:
	case devclusterv1.Action_ACTION_KILL, devclusterv1.Action_ACTION_PAUSE, devclusterv1.Action_ACTION_RESUME:
		return nil, status.Errorf(codes.InvalidArgument, "action: etcd runs inside the launcher: it can be stopped (as SIGTERM stops etcd), started and restarted, not %s",
			strings.ToLower(strings.TrimPrefix(req.GetAction().String(), "ACTION_")))
	default:
		return nil, status.Errorf(codes.InvalidArgument, "action: unknown action %v", req.GetAction())
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.c.etcdAction(ctx, req.GetAction()); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &devclusterv1.NodeActionResponse{Node: s.c.etcdProto()}, nil
}

package devcluster

import (
	"context"
	"errors"
	"strings"
	"sync"

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
	extra := req.GetExtraArgs()
	if act := req.GetAction(); len(extra) > 0 && act != devclusterv1.Action_ACTION_START && act != devclusterv1.Action_ACTION_RESTART {
		return nil, status.Errorf(codes.InvalidArgument, "extra_args: only a start or restart takes extra arguments, not %v", act)
	}
	for i, a := range extra {
		if strings.TrimSpace(a) == "" {
			return nil, status.Errorf(codes.InvalidArgument, "extra_args[%d]: empty argument", i)
		}
	}
	if err := s.c.actions.lock(ctx); err != nil {
		return nil, err
	}
	defer s.c.actions.unlock()
	switch req.GetAction() {
	case devclusterv1.Action_ACTION_STOP:
		err = s.c.stopNode(n)
	case devclusterv1.Action_ACTION_KILL:
		err = n.Kill()
	case devclusterv1.Action_ACTION_PAUSE:
		err = n.Pause()
	case devclusterv1.Action_ACTION_RESUME:
		err = n.Resume()
	case devclusterv1.Action_ACTION_START:
		err = n.StartWith(extra)
	case devclusterv1.Action_ACTION_RESTART:
		err = s.restart(n, extra)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "action: unknown action %v", req.GetAction())
	}
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &devclusterv1.NodeActionResponse{Node: n.Proto()}, nil
}

// restart stops n if it runs, then starts it. A node that ignored SIGTERM
// for the whole grace was killed: its process is gone, so the restart
// starts it all the same (the kill is noted in its log) rather than leave
// it STOPPED after a restart was asked. A stop hurried by the launcher's
// shutdown still ends the restart.
func (s *controlService) restart(n *Node, extra []string) error {
	if _, _, err := n.running(); err == nil {
		var killed *KilledAfterGraceError
		switch err := s.c.stopNode(n); {
		case errors.As(err, &killed):
			n.Note("restart: %v", killed)
		case err != nil:
			return err
		}
	}
	return n.StartWith(extra)
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
	if err := s.c.actions.lock(ctx); err != nil {
		return nil, err
	}
	defer s.c.actions.unlock()
	if err := s.c.etcdAction(ctx, req.GetAction()); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &devclusterv1.NodeActionResponse{Node: s.c.etcdProto()}, nil
}

// actionLock lets one node action run at a time, which keeps start/stop
// races out of the launcher. A caller waits for the lock only as long as
// its call lasts: an action whose caller was already told DEADLINE_EXCEEDED
// must not run later behind its back (a burst of clicks from two console
// pages queued behind a stop that takes its whole timeout).
type actionLock struct {
	once sync.Once
	sem  chan struct{}
	// closing (under the lock): the launcher is shutting down (Cluster.Down)
	// and takes no more actions.
	closing bool
}

func (l *actionLock) ch() chan struct{} {
	l.once.Do(func() { l.sem = make(chan struct{}, 1) })
	return l.sem
}

// lock takes the lock before ctx ends, as a gRPC status otherwise.
func (l *actionLock) lock(ctx context.Context) error {
	select {
	case l.ch() <- struct{}{}:
		if ctx.Err() == nil {
			break
		}
		l.unlock() // both were ready at once: the call has ended all the same
		return notCarriedOut(ctx)
	case <-ctx.Done():
		return notCarriedOut(ctx)
	}
	if l.closing {
		l.unlock()
		return status.Error(codes.Unavailable, "the dev cluster is shutting down: it takes no more actions")
	}
	return nil
}

func notCarriedOut(ctx context.Context) error {
	return status.Errorf(status.FromContextError(ctx.Err()).Code(),
		"the call ended while another action on the dev cluster was still running; this one was not carried out")
}

func (l *actionLock) unlock() { <-l.ch() }

// close waits for the action in flight, if any, and refuses every later one.
func (l *actionLock) close() {
	l.ch() <- struct{}{}
	l.closing = true
	l.unlock()
}

package gateway

import (
	"context"
	"errors"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

// watchStream adapts the client package's WatchCluster iterator (which
// reconnects to the active controller by itself) to the stream interface
// the REST handler reads from.
type watchStream struct {
	ctx   context.Context
	items <-chan watchItem
	first *adminv1.WatchClusterResponse
}

type watchItem struct {
	resp *adminv1.WatchClusterResponse
	err  error
}

var _ adminv1.AdminService_WatchClusterClient = (*watchStream)(nil)

// watch starts the watch and waits for its first snapshot, so that an
// error before it is an ordinary REST error. The goroutine ends with ctx,
// which net/http ends when the handler returns.
func watch(ctx context.Context, a *client.Admin, req *adminv1.WatchClusterRequest) (*watchStream, error) {
	items := make(chan watchItem)
	go func() {
		defer close(items)
		for resp, err := range a.WatchCluster(ctx, req) {
			select {
			case items <- watchItem{resp, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	s := &watchStream{ctx: ctx, items: items}
	first, err := s.Recv()
	if err != nil {
		return nil, err
	}
	s.first = first
	return s, nil
}

func (s *watchStream) Recv() (*adminv1.WatchClusterResponse, error) {
	if m := s.first; m != nil {
		s.first = nil
		return m, nil
	}
	select {
	case it, ok := <-s.items:
		if !ok {
			return nil, s.ended()
		}
		return it.resp, it.err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *watchStream) ended() error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended")
}

func (s *watchStream) Header() (metadata.MD, error) { return nil, nil }
func (s *watchStream) Trailer() metadata.MD         { return nil }
func (s *watchStream) CloseSend() error             { return nil }
func (s *watchStream) Context() context.Context     { return s.ctx }
func (s *watchStream) SendMsg(any) error {
	return errors.New("watch: the request was sent when the stream opened")
}

func (s *watchStream) RecvMsg(m any) error {
	resp, err := s.Recv()
	if err != nil {
		return err
	}
	proto.Merge(m.(proto.Message), resp)
	return nil
}

package gateway

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// watchStream adapts the client package's WatchCluster iterator (which
// reconnects to the active controller by itself) to the stream interface
// the REST handler reads from.
type watchStream struct {
	ctx    context.Context
	cancel context.CancelFunc // ends the watch; the request's end does too
	items  <-chan watchItem
	first  *adminv1.WatchClusterResponse
	// silence is how long the stream waits for its next message: the
	// controller sends one at least every interval, and the client finds
	// the next active controller within the budget.
	silence time.Duration
}

type watchItem struct {
	resp *adminv1.WatchClusterResponse
	err  error
}

var _ adminv1.AdminService_WatchClusterClient = (*watchStream)(nil)

// watch starts the watch and waits for its first snapshot, so that an
// error before it is an ordinary REST error. The client's watch retries
// until an active controller answers; the wait for the first snapshot is
// bounded by budget (the retry budget of every REST call): with no
// controller reachable, the call had no answer at all, not even headers.
// The goroutine ends with ctx, which net/http ends when the handler
// returns.
func watch(ctx context.Context, a *client.Admin, req *adminv1.WatchClusterRequest, budget time.Duration) (*watchStream, error) {
	ctx, cancel := context.WithCancel(ctx)
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
	s := &watchStream{ctx: ctx, items: items, cancel: cancel, silence: watchInterval(req) + budget}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case it, ok := <-items:
		switch {
		case !ok:
			cancel()
			return nil, s.ended()
		case it.err != nil:
			cancel()
			return nil, it.err
		}
		s.first = it.resp
		return s, nil
	case <-timer.C:
		cancel()
		return nil, kerr.New(kerr.NetworkException, "no active controller answered the watch within %s", budget)
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}

// Recv returns the next message. A stream with no message for its
// silence ends with NETWORK_EXCEPTION, as a new watch is refused then: with
// every controller gone, it stayed open and silent for as long as they
// were, where a follow ends once its retry budget is spent.
func (s *watchStream) Recv() (*adminv1.WatchClusterResponse, error) {
	if m := s.first; m != nil {
		s.first = nil
		return m, nil
	}
	timer := time.NewTimer(s.silence)
	defer timer.Stop()
	select {
	case it, ok := <-s.items:
		if !ok {
			return nil, s.ended()
		}
		return it.resp, it.err
	case <-timer.C:
		s.cancel()
		return nil, kerr.New(kerr.NetworkException, "no message from an active controller for %s: the watch ends; open it again", s.silence)
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// watchInterval is the longest a controller leaves a watch without a
// message: the request's interval_ms, as the controller reads it.
func watchInterval(req *adminv1.WatchClusterRequest) time.Duration {
	if ms := req.GetIntervalMs(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return time.Second
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

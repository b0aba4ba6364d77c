package gateway

import (
	"context"
	"errors"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// followStream is a Follow call that outlives leader moves: when the stream
// breaks with an answer a new route may fix, it reopens on the current
// leader from the next offset, within the retry budget.
type followStream struct {
	ctx   context.Context
	r     *router
	req   *brokerv1.FollowRequest // its offset advances with each answer
	cur   brokerv1.BrokerService_FollowClient
	first *brokerv1.FollowResponse
}

var _ brokerv1.BrokerService_FollowClient = (*followStream)(nil)

// follow opens the stream and waits for its first answer, so that an error
// before any record (unknown topic, bad offset) is an ordinary REST error
// with its HTTP status rather than an error line in a 200 stream.
func (r *router) follow(ctx context.Context, req *brokerv1.FollowRequest) (brokerv1.BrokerService_FollowClient, error) {
	s := &followStream{ctx: untilStop(ctx, r.stopping), r: r, req: proto.CloneOf(req)}
	first, err := s.Recv()
	if isEOF(err) {
		// A stream that ends before its first answer has told the caller
		// nothing: our deadline ran out on the broker's side first, or the
		// broker is stopping. Either way it is an error to retry, never a
		// success with no body nor an unknown 500.
		if ctx.Err() != nil {
			return nil, kerr.New(kerr.RequestTimedOut, "%s-%d: no answer to follow before the deadline", req.GetTopic(), req.GetPartition())
		}
		return nil, kerr.New(kerr.NetworkException, "%s-%d: the broker ended the follow stream before its first answer", req.GetTopic(), req.GetPartition())
	}
	if err != nil {
		return nil, err
	}
	s.first = first
	return s, nil
}

func (s *followStream) Recv() (*brokerv1.FollowResponse, error) {
	if m := s.first; m != nil {
		s.first = nil
		return m, nil
	}
	p := newPacer(s.r.budget)
	for {
		m, retry, err := s.attempt()
		if err == nil {
			return m, nil
		}
		if !retry || s.ctx.Err() != nil || !p.wait(s.ctx) {
			return nil, err
		}
	}
}

// attempt reads the next answer, opening the stream on the leader first
// when there is none, and says whether a failure may be retried.
func (s *followStream) attempt() (*brokerv1.FollowResponse, bool, error) {
	if s.cur == nil {
		bc, err := s.r.leader(s.ctx, s.req.GetTopic(), s.req.GetPartition())
		if err != nil {
			ke := asKerr(err)
			return nil, reroutable(ke.Code), ke
		}
		cur, err := bc.Follow(s.ctx, s.req)
		if err != nil {
			retry, ke := s.broke(err)
			return nil, retry, ke
		}
		s.cur = cur
	}
	m, err := s.cur.Recv()
	if err != nil {
		retry, ke := s.broke(err)
		return nil, retry, ke
	}
	f := m.GetFetch()
	if e, ok := lastEpochRead(f, s.req.GetOffset()); ok {
		// A stream reopened on another replica checks that its log
		// still holds what was read (KIP-320): after an unclean election
		// the new leader may have replaced it.
		s.req.LastFetchedEpoch = &e
	}
	s.req.Offset = f.GetNextOffset()
	return m, false, nil
}

// lastEpochRead is the leader epoch of the last record at or after from in
// an answer, structured or raw.
func lastEpochRead(f *brokerv1.FetchResponse, from int64) (int32, bool) {
	if recs := f.GetRecords(); len(recs) > 0 {
		return recs[len(recs)-1].GetLeaderEpoch(), true
	}
	return recordbatch.LastEpochFrom(f.GetRecordBatches(), from)
}

// broke forgets the broken stream and judges its error. io.EOF (the
// broker ended the stream) is passed on as it is: the REST stream ends too.
func (s *followStream) broke(err error) (bool, error) {
	s.cur = nil
	if s.ctx.Err() != nil || isEOF(err) {
		return false, err
	}
	ke := asKerr(err)
	return s.r.noteError(s.req.GetTopic(), s.req.GetPartition(), ke), ke
}

func (s *followStream) Header() (metadata.MD, error) { return nil, nil }
func (s *followStream) Trailer() metadata.MD         { return nil }
func (s *followStream) CloseSend() error             { return nil }
func (s *followStream) Context() context.Context     { return s.ctx }
func (s *followStream) SendMsg(any) error {
	return errors.New("follow: the request was sent when the stream opened")
}

func (s *followStream) RecvMsg(m any) error {
	resp, err := s.Recv()
	if err != nil {
		return err
	}
	proto.Merge(m.(proto.Message), resp)
	return nil
}

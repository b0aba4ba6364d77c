package gateway

import (
	"context"
	"errors"
	"time"

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
	ctx context.Context
	r   *router
	req *brokerv1.FollowRequest // its offset advances with each answer
	cur brokerv1.BrokerService_FollowClient
	// cancel ends cur's call (its context is s.ctx's child).
	cancel context.CancelFunc
	first  *brokerv1.FollowResponse
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
	var p *pacer
	for {
		m, retry, err := s.attempt()
		if err == nil {
			return m, nil
		}
		if p == nil {
			// The budget counts from the break: counted from the call, a
			// stream quiet for longer than the budget gave up at once.
			p = newPacer(s.r.budget)
		}
		if !retry || s.ctx.Err() != nil || !p.wait(s.ctx) {
			return nil, err
		}
	}
}

// attempt reads the next answer, opening the stream on the leader first
// when there is none, and says whether a failure may be retried.
func (s *followStream) attempt() (*brokerv1.FollowResponse, bool, error) {
	var first *firstAnswer
	if s.cur == nil {
		bc, err := s.r.leader(s.ctx, s.req.GetTopic(), s.req.GetPartition())
		if err != nil {
			ke := asKerr(err)
			return nil, reroutable(ke.Code), ke
		}
		ctx, cancel := context.WithCancel(s.ctx)
		s.cancel = cancel
		first = awaitFirstAnswer(s.r.requestTimeout, cancel)
		cur, err := bc.Follow(ctx, s.req)
		if err != nil {
			retry, ke := s.brokeOpening(first, err)
			return nil, retry, ke
		}
		s.cur = cur
	}
	m, err := s.cur.Recv()
	if err != nil {
		retry, ke := s.brokeOpening(first, err)
		return nil, retry, ke
	}
	if first != nil && first.late() {
		// The answer came as the timer cut the stream: keep the answer,
		// open the stream again for the next.
		s.drop()
	}
	f := m.GetFetch()
	if e, ok := lastEpochRead(f, s.req.GetOffset()); ok {
		// A stream reopened on another replica checks that its log
		// still holds what was read (KIP-320): after an unclean election
		// the new leader may have replaced it.
		s.req.LastFetchedEpoch = &e
	}
	if id := f.GetTopicId(); id != "" {
		// A stream reopened after the topic was deleted and created
		// again names the topic read, and ends with UNKNOWN_TOPIC_ID
		// instead of going on in the new topic at the old offsets.
		s.req.TopicId = id
	}
	s.req.Offset = f.GetNextOffset()
	return m, false, nil
}

// firstAnswer bounds the wait for a new stream's first answer by the
// request timeout: a broker answers a new Follow at once (its first read
// does not wait for records), so one that has not is frozen or out of
// reach, and the stream is cut. Without it a frozen leader held the
// stream, and a new follow's headers, until the connection's keepalive or
// connect timeout, beyond the retry budget.
type firstAnswer struct{ timer *time.Timer }

func awaitFirstAnswer(timeout time.Duration, cancel context.CancelFunc) *firstAnswer {
	return &firstAnswer{timer: time.AfterFunc(timeout, cancel)}
}

// late stops the timer and reports whether it had fired (it cuts, or has
// cut, the stream). Asked once per stream.
func (a *firstAnswer) late() bool { return !a.timer.Stop() }

// brokeOpening is broke for a stream that may still be waiting for its
// first answer: one cut by the timer is a timeout on the leader, worth a
// new look at the partition's leader (a read is safe to retry elsewhere).
func (s *followStream) brokeOpening(first *firstAnswer, err error) (bool, error) {
	if first == nil || !first.late() || s.ctx.Err() != nil {
		return s.broke(err)
	}
	s.drop()
	s.r.cl.NoteTimeout(s.req.GetTopic(), s.req.GetPartition())
	return true, kerr.New(kerr.RequestTimedOut, "%s-%d: the leader did not answer the follow within %v",
		s.req.GetTopic(), s.req.GetPartition(), s.r.requestTimeout)
}

// drop forgets the current stream and ends its call.
func (s *followStream) drop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.cur, s.cancel = nil, nil
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
	s.drop()
	if s.ctx.Err() != nil || isEOF(err) {
		return false, err
	}
	ke := asKerr(err)
	retry := s.r.noteError(s.req.GetTopic(), s.req.GetPartition(), ke)
	if ke.Code == kerr.UnknownTopicID && s.req.GetTopicId() != "" {
		// The topic followed is gone for good (a topic id is never
		// used again): the REST stream ends with it.
		return false, ke
	}
	return retry, ke
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

// Package sender delivers the active controller's requests to one broker
// incarnation, in order (Kafka's ControllerChannelManager, one
// RequestSendThread per broker).
//
// Concurrency: a Sender owns one goroutine and one FIFO queue. Enqueue and
// Stop may be called from any goroutine and never block on the network; the
// goroutine is the only one that calls the broker. Callbacks (OnStale) run
// on the sender's goroutine and must not wait for the sender itself.
package sender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/retry"
)

// ErrStopped is what a request's Done receives when the sender stopped
// before the broker accepted it: the broker departed, or the controller
// stepped down.
var ErrStopped = errors.New("sender: stopped before delivery")

// Request is one control request. Exactly one of the four is set.
type Request struct {
	LeaderAndIsr    *controlv1.LeaderAndIsrRequest
	UpdateMetadata  *controlv1.UpdateMetadataRequest
	StopReplica     *controlv1.StopReplicaRequest
	YieldLeadership *controlv1.YieldLeadershipRequest
	// Done, if not nil, receives the outcome exactly once: nil when the
	// broker accepted the request, else the error the sender gave up with.
	// It must have room for one value.
	Done chan<- error
}

// Kind names the request, for logs.
func (r Request) Kind() string {
	switch {
	case r.LeaderAndIsr != nil:
		return "LeaderAndIsr"
	case r.UpdateMetadata != nil:
		return "UpdateMetadata"
	case r.StopReplica != nil:
		return "StopReplica"
	case r.YieldLeadership != nil:
		return "YieldLeadership"
	}
	return "empty"
}

func (r Request) finish(err error) {
	if r.Done != nil {
		r.Done <- err
	}
}

// Target is the broker incarnation a sender serves.
type Target struct {
	ID      int32
	Epoch   int64
	Address string
}

// Options configures a Sender.
type Options struct {
	Client controlv1.BrokerControlServiceClient
	Target Target
	// Timeout bounds one attempt; 0 means 5 s.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts after a
	// transport error; 0 means 50 ms and 1 s.
	MinBackoff, MaxBackoff time.Duration
	// OnStale is called once, from the sender's goroutine, when the broker
	// answers STALE_CONTROLLER_EPOCH: a newer controller exists (F22). The
	// sender then stops.
	OnStale func(error)
	// OnOlderState, if set, is called with the number of partitions a
	// LeaderAndIsr answer refused as older than the broker's own state
	// (STALE_CONTROLLER_EPOCH on a partition): etcd holds older metadata
	// than the brokers have seen.
	OnOlderState func(n int)
	// Gate, if set, is called before every attempt and may block; a non-nil
	// error stops the sender. Tests use it to hold requests in flight.
	Gate   func(ctx context.Context) error
	Logger *slog.Logger
}

// Sender is one broker incarnation's ordered request queue.
type Sender struct {
	o      Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	exited chan struct{}

	mu      sync.Mutex
	queue   []Request
	stopped bool
}

// Start starts a sender's goroutine.
func Start(o Options) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Second, o.MinBackoff)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{
		o:      o,
		log:    logging.OrDiscard(o.Logger).With("broker_id", o.Target.ID, "broker_epoch", o.Target.Epoch),
		ctx:    ctx,
		cancel: cancel,
		wake:   make(chan struct{}, 1),
		exited: make(chan struct{}),
	}
	go s.run()
	return s
}

// Target is the broker incarnation this sender serves.
func (s *Sender) Target() Target { return s.o.Target }

// Enqueue appends r to the queue. After Stop it fails r with ErrStopped.
func (s *Sender) Enqueue(r Request) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		r.finish(ErrStopped)
		return
	}
	s.queue = append(s.queue, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Pending is the number of requests not yet delivered, including the one in
// flight.
func (s *Sender) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Stop drops the queue (each request's Done gets ErrStopped) and cancels
// the attempt in flight. It does not wait; Wait does.
func (s *Sender) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	dropped := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.cancel()
	for _, r := range dropped {
		r.finish(ErrStopped)
	}
}

// Wait blocks until the sender's goroutine has exited (after Stop).
func (s *Sender) Wait() { <-s.exited }

func (s *Sender) run() {
	defer close(s.exited)
	for {
		r, ok := s.next()
		if !ok {
			return
		}
		err := s.deliver(r)
		s.mu.Lock()
		// Stop may have emptied the queue and finished r already.
		if len(s.queue) > 0 && !s.stopped {
			s.queue = s.queue[1:]
			s.mu.Unlock()
			r.finish(err)
		} else {
			s.mu.Unlock()
		}
	}
}

// next waits for the head of the queue; false once stopped.
func (s *Sender) next() (Request, bool) {
	for {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return Request{}, false
		}
		if len(s.queue) > 0 {
			r := s.queue[0]
			s.mu.Unlock()
			return r, true
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return Request{}, false
		}
	}
}

// deliver sends r until the broker answers or the sender stops. Transport
// failures are retried with backoff: the broker's registration is unchanged
// for as long as this sender lives (the controller replaces the sender when
// the epoch changes), so the request is still meant for it.
func (s *Sender) deliver(r Request) error {
	backoff := retry.Backoff{Base: s.o.MinBackoff, Max: s.o.MaxBackoff}
	for attempt := 1; ; attempt++ {
		if s.o.Gate != nil {
			if err := s.o.Gate(s.ctx); err != nil {
				return ErrStopped
			}
		}
		if s.ctx.Err() != nil {
			return ErrStopped
		}
		err := s.attempt(r)
		if err == nil {
			return nil
		}
		if s.ctx.Err() != nil {
			return ErrStopped
		}
		code := kerr.CodeOf(err)
		switch {
		case code == kerr.StaleControllerEpoch:
			s.log.Warn("broker refused a request from a stale controller epoch; a newer controller exists",
				"request", r.Kind(), "err", err)
			if s.o.OnStale != nil {
				s.o.OnStale(err)
			}
			s.Stop()
			return err
		case retriable(code):
			if attempt == 1 || attempt%20 == 0 {
				s.log.Info("broker unreachable; retrying", "request", r.Kind(), "attempt", attempt, "err", err)
			}
			if !retry.Sleep(s.ctx, backoff.Delay(attempt)) {
				return ErrStopped
			}
		default:
			s.log.Warn("broker refused a control request", "request", r.Kind(), "err", err)
			return err
		}
	}
}

// retriable says whether a failure is the transport's, or a broker process
// not registered yet (retry), rather than the broker's answer (give up on
// this request). A process that registers under another epoch then refuses
// the request as stale.
func retriable(c kerr.Code) bool {
	switch c {
	case kerr.NetworkException, kerr.RequestTimedOut, kerr.BrokerNotAvailable:
		return true
	}
	return false
}

// attempt makes one call and folds the answer's error code into the error.
func (s *Sender) attempt(r Request) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.o.Timeout)
	defer cancel()
	c := s.o.Client
	switch {
	case r.LeaderAndIsr != nil:
		resp, err := c.LeaderAndIsr(ctx, r.LeaderAndIsr)
		if err != nil {
			return kerr.FromStatus(err)
		}
		s.logPartitionErrors(r.Kind(), resp.GetPartitions())
		return answerErr(resp.GetErrorCode())
	case r.UpdateMetadata != nil:
		resp, err := c.UpdateMetadata(ctx, r.UpdateMetadata)
		if err != nil {
			return kerr.FromStatus(err)
		}
		return answerErr(resp.GetErrorCode())
	case r.StopReplica != nil:
		resp, err := c.StopReplica(ctx, r.StopReplica)
		if err != nil {
			return kerr.FromStatus(err)
		}
		s.logPartitionErrors(r.Kind(), resp.GetPartitions())
		return answerErr(resp.GetErrorCode())
	case r.YieldLeadership != nil:
		resp, err := c.YieldLeadership(ctx, r.YieldLeadership)
		if err != nil {
			return kerr.FromStatus(err)
		}
		return yieldErr(resp)
	}
	return fmt.Errorf("sender: empty request")
}

// answerErr turns an answer's error code into an error (nil for NONE).
func answerErr(code commonv1.ErrorCode) error {
	if c := kerr.Code(code); c != kerr.None {
		return kerr.New(c, "answered %s", c)
	}
	return nil
}

// yieldErr folds a YieldLeadership answer into one error: a partition the
// broker did not yield fails the request, and the controller leaves every
// partition of it where it is.
func yieldErr(resp *controlv1.YieldLeadershipResponse) error {
	if err := answerErr(resp.GetErrorCode()); err != nil {
		return err
	}
	for _, p := range resp.GetPartitions() {
		if c := kerr.Code(p.GetErrorCode()); c != kerr.None {
			return kerr.New(c, "%s-%d: %s", p.GetTopic(), p.GetPartition(), p.GetErrorMessage())
		}
	}
	return nil
}

func (s *Sender) logPartitionErrors(kind string, parts []*controlv1.PartitionResult) {
	older := 0
	for _, p := range parts {
		switch code := kerr.Code(p.GetErrorCode()); code {
		case kerr.None:
		case kerr.StaleControllerEpoch:
			// The broker holds a newer state of this partition than the one
			// loaded from etcd: etcd's metadata went backwards.
			older++
			s.log.Error("Broker holds a newer state of a partition than etcd: etcd's metadata went backwards (restored from an older snapshot?); the broker keeps its own",
				"request", kind, "topic", p.GetTopic(), "partition", p.GetPartition(), "err", p.GetErrorMessage())
		default:
			s.log.Warn("broker reported a partition error", "request", kind, "topic", p.GetTopic(),
				"partition", p.GetPartition(), "code", code.String(), "err", p.GetErrorMessage())
		}
	}
	if older > 0 && s.o.OnOlderState != nil {
		s.o.OnOlderState(older)
	}
}

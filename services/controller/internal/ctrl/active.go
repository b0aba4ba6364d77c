package ctrl

import (
	"context"
	"errors"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/logging"
)

// Settings are the knobs of a term.
type Settings struct {
	// RequestTimeout bounds one control request attempt to a broker and one
	// etcd write.
	RequestTimeout time.Duration
	// SessionGrace is how long a broker whose BrokerSession broke has to
	// reopen it (or answer a health check) before it is declared dead;
	// 0 leaves broker failure to lease expiry alone.
	SessionGrace time.Duration
	// StaticBroker is the controller's static broker-level configuration
	// (auto.leader.rebalance.enable, leader.imbalance.*,
	// default.replication.factor, num.partitions...): the lowest layer under
	// the dynamic broker configs in etcd.
	StaticBroker map[string]string
	// EventRing is how many recent ClusterEvents are kept; 0 means 512.
	EventRing int
}

// Deps is what a term needs. Everything in it is safe for concurrent use.
type Deps struct {
	Store   *metastore.Store
	Session *metastore.Session
	Log     *slog.Logger
	Metrics *Metrics
	// Dial opens a connection to a broker; nil uses gRPC with Creds.
	Dial func(address string) (*grpc.ClientConn, error)
	// Creds are the transport credentials of the default Dial (mutual TLS
	// as this controller's certificate); nil is plaintext.
	Creds grpc.DialOption
	// DialContext opens a raw connection to a broker: under Dial's gRPC
	// connections when Dial is nil, and for the fast-failover probe. nil
	// dials TCP.
	DialContext func(ctx context.Context, address string) (net.Conn, error)
	// LostAt tells when this process last saw the previous controller go
	// (its key deleted); zero when unknown. Failover time is measured from
	// it. It is asked once the state is pushed, so a watch that reported the
	// deletion a little after the election won still counts.
	LostAt   func() time.Time
	Settings Settings
	// Tracer records elections, ISR changes and failovers as spans; nil
	// records nothing.
	Tracer trace.Tracer
}

// Active is one term of office. Its exported methods are safe for concurrent
// use; they hand their work to the loop (see the package doc).
type Active struct {
	// core holds the term's decision state and makes the decisions
	// (core.go); the rest of Active is the shell that runs them.
	*core
	d    Deps
	sess *metastore.Session

	ctx    context.Context
	cancel context.CancelFunc
	events chan queuedEvent
	quit   chan struct{} // closed when the loop has exited
	done   chan struct{} // closed when every goroutine of the term is gone
	wg     sync.WaitGroup
	// exitErr says why the term ended. Written only by the loop before
	// quit is closed; read by others only after quit.
	exitErr   error
	electedAt time.Time

	failover atomic.Int64 // ns; 0 until the first full push completed
	pushed   chan struct{}
	gate     gate
	// runningSince is when the event the loop runs began (Unix ns; 0
	// while it waits): a loop stuck inside one event shows as its age.
	runningSince atomic.Int64
	// queuedCalls counts the calls queued for the loop whose callers
	// still wait for them (StallForTest's view of who is stuck).
	queuedCalls atomic.Int32
	// loaded is set once load found this term's epoch in etcd: from then
	// on, while its lease is held, it reports itself the active
	// controller (Metrics.activeTerm).
	loaded atomic.Bool
	// producerIDFloor is the largest end of a producer id block this term
	// handed out or a broker's session reported holding: no block starts
	// below it, though etcd's counter went back (restored from an older
	// snapshot).
	producerIDFloor atomic.Int64

	// Loop-owned state (see the package doc), besides the core's.
	links       map[int32]*link
	controllers map[int32]metastore.ControllerNode
	ring        *ring
	subs        map[*subscriber]struct{}
	timers      map[timerKey]*time.Timer // the core's (effArmTimer)
	// alterRefusals spaces the lines of refused AlterPartition requests:
	// a broker retries one every 200 ms (alter.go).
	alterRefusals *logging.Limiter
	// tracked holds the outcomes of the pushes the current step asked to
	// keep (effPush.track).
	tracked map[int32][]<-chan error
	// groups holds the outcomes of pushes by ack group until an
	// effAwaitAcks takes them.
	groups map[uint64][]<-chan error
}

// Start begins a term for a session just won. It returns at once; the
// loop loads the cluster first. The term ends (Done) when it steps down or
// ctx ends; the caller then Waits and may campaign again.
func Start(ctx context.Context, d Deps) *Active {
	if d.DialContext == nil {
		var nd net.Dialer
		d.DialContext = func(ctx context.Context, addr string) (net.Conn, error) { return nd.DialContext(ctx, "tcp", addr) }
	}
	if d.Creds == nil {
		d.Creds = grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	if d.Dial == nil {
		d.Dial = func(addr string) (*grpc.ClientConn, error) {
			return grpc.NewClient(addr, d.Creds, grpc.WithContextDialer(d.DialContext), connpool.Keepalive())
		}
	}
	if d.Settings.RequestTimeout <= 0 {
		d.Settings.RequestTimeout = 5 * time.Second
	}
	if d.Settings.EventRing <= 0 {
		d.Settings.EventRing = 512
	}
	info := d.Session.Info()
	log := logging.OrDiscard(d.Log).With("controller_epoch", info.Epoch)
	ctx, cancel := context.WithCancel(ctx)
	a := &Active{
		core: newCore(&commonv1.Node{Id: info.ControllerID, Address: info.Address}, info.Epoch, log, policy{},
			// Placement's random choices: a fresh stream per term (core.rng).
			rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(info.Epoch)))),
		d:           d,
		sess:        d.Session,
		ctx:         ctx,
		cancel:      cancel,
		events:      make(chan queuedEvent, 256),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
		electedAt:   time.Now(),
		pushed:      make(chan struct{}),
		links:       map[int32]*link{},
		controllers: map[int32]metastore.ControllerNode{},
		ring:        newRing(d.Settings.EventRing),
		subs:        map[*subscriber]struct{}{},
		timers:      map[timerKey]*time.Timer{},
		groups:      map[uint64][]<-chan error{},

		alterRefusals: logging.NewLimiter(alterRefusalWarnEvery),
	}
	a.core.staticBroker = d.Settings.StaticBroker
	a.core.pol = policy{unclean: a.uncleanConfigured, topicConfigs: a.topicConfigMap, brokerConfigs: a.brokerConfigsFor,
		rebalance: a.rebalanceConfigured, grace: d.Settings.SessionGrace}
	d.Metrics.term.Store(a)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		select {
		case <-a.sess.Done():
			a.post(func() {
				a.stepDown(errors.New("lost the controller lease (expired, revoked, or etcd unreachable for a whole TTL)"))
			})
		case <-a.quit:
		}
	}()
	go a.run()
	return a
}

// Done is closed when the term has ended: requests then get NOT_CONTROLLER.
func (a *Active) Done() <-chan struct{} { return a.quit }

// Wait blocks until every goroutine of the term has exited.
func (a *Active) Wait() { <-a.done }

// Err says why the term ended; nil while it is active.
func (a *Active) Err() error {
	select {
	case <-a.quit:
		return a.exitErr
	default:
		return nil
	}
}

// Held reports whether the term's lease is surely alive at now
// (metastore.Session.Held): a term that cannot say so must not act as the
// active controller, even before its session notices the loss.
func (a *Active) Held(now time.Time) bool { return a.sess.Held(now) }

// Epoch is the controller epoch of this term.
func (a *Active) Epoch() int32 { return a.epoch }

// Pushed is closed once the state loaded at election has been delivered to
// every live broker (or the wait for it timed out).
func (a *Active) Pushed() <-chan struct{} { return a.pushed }

// Failover is the time from the previous controller going (as this process
// saw it) to this term having pushed its state; ok is false before that or
// when there was no previous controller to measure from.
func (a *Active) Failover() (d time.Duration, ok bool) {
	n := a.failover.Load()
	return time.Duration(n), n > 0
}

// run is the loop.
func (a *Active) run() {
	defer a.shutdown()
	if err := a.load(); err != nil {
		a.stepDown(err)
		return
	}
	for a.exitErr == nil {
		select {
		case ev := <-a.events:
			start := time.Now()
			a.d.Metrics.eventQueueSeconds.Observe(start.Sub(ev.at).Seconds())
			a.runningSince.Store(start.UnixNano())
			ev.fn()
			a.afterEvent()
			a.runningSince.Store(0)
			a.d.Metrics.eventSeconds.Observe(time.Since(start).Seconds())
		case <-a.ctx.Done():
			a.stepDown(errResigning)
		}
	}
}

// errResigning ends a term because the process is shutting down.
var errResigning = errors.New("controller shutting down")

// stepDown ends the term after the current event. It logs loudly: a
// controller that stops being active is an operator-visible event.
func (a *Active) stepDown(cause error) {
	if a.exitErr != nil {
		return
	}
	a.exitErr = cause
	if a.core.ended == nil {
		a.core.ended = cause
	}
	if errors.Is(cause, errResigning) {
		a.log.Info("Resigning as the active controller", "controller_id", a.self.Id, "reason", cause.Error())
		return
	}
	a.log.Error("Stepping down as the active controller", "controller_id", a.self.Id, "reason", cause.Error())
}

// afterEvent refreshes gauges and wakes WatchCluster streams.
func (a *Active) afterEvent() {
	if a.stateDirty {
		a.d.Metrics.offlineCount.Store(int64(a.offlineCount()))
	}
	if a.stateDirty || a.viewDirty {
		for s := range a.subs {
			select {
			case s.ch <- struct{}{}:
			default:
			}
		}
	}
	a.stateDirty, a.viewDirty = false, false
}

// shutdown runs on the loop goroutine after the loop: it ends the term.
func (a *Active) shutdown() {
	close(a.quit)
	a.d.Metrics.term.CompareAndSwap(a, nil)
	a.cancel()
	a.gate.open()
	for _, t := range a.timers {
		t.Stop()
	}
	var links []*link
	for _, l := range a.links {
		l.out.Stop()
		links = append(links, l)
	}
	a.d.Metrics.SetStandby()
	go func() {
		a.wg.Wait()
		for _, l := range links {
			l.out.Wait()
			if l.conn != nil {
				_ = l.conn.Close()
			}
		}
		close(a.done)
	}()
}

// queuedEvent is work for the loop and when it was queued.
type queuedEvent struct {
	fn func()
	at time.Time
}

// post queues fn for the loop; false once the loop has exited. The loop
// itself must never call it.
func (a *Active) post(fn func()) bool {
	select {
	case a.events <- queuedEvent{fn: fn, at: time.Now()}:
		return true
	case <-a.quit:
		return false
	}
}

// call runs fn on the loop and returns its error, or NOT_CONTROLLER if the
// term ends first, or ctx's error. Results fn writes to captured variables
// may be read once call returned fn's own error.
func (a *Active) call(ctx context.Context, fn func() error) error {
	return a.callOrUndo(ctx, fn, nil)
}

// callOrUndo is call for a request whose fn leaves something on the loop
// that the caller is to take away later (an open session, a watcher): a
// caller that leaves (ctx or the term ended) after queueing fn would leave
// it there for good, so when fn succeeds with its caller gone, undo runs on
// the loop right after it. Whether the caller got fn's answer or left is
// decided once, by whichever side marks it first.
func (a *Active) callOrUndo(ctx context.Context, fn func() error, undo func()) error {
	const waiting, answered, left = 0, 1, 2
	var outcome atomic.Int32
	reply := make(chan error, 1)
	run := func() {
		err := fn()
		if outcome.CompareAndSwap(waiting, answered) {
			reply <- err
		} else if err == nil && undo != nil {
			undo()
		}
	}
	select {
	case a.events <- queuedEvent{fn: run, at: time.Now()}:
	case <-a.quit:
		return a.notController()
	case <-ctx.Done():
		return ctx.Err()
	}
	a.queuedCalls.Add(1)
	defer a.queuedCalls.Add(-1)
	var gone error
	select {
	case err := <-reply:
		return err
	case <-a.quit:
		gone = a.notController()
	case <-ctx.Done():
		gone = ctx.Err()
	}
	if outcome.CompareAndSwap(waiting, left) {
		return gone // fn, if it ever runs, answers no one
	}
	return <-reply // fn answered as the caller was leaving
}

// ask steps the event mk builds around reply and waits for reply to run,
// which may be in a later step: a decision that waits for a broker (a
// leader yielding, handoff.go) replies from the step that takes its
// answer. reply runs on the loop. The term's end answers NOT_CONTROLLER.
func (a *Active) ask(ctx context.Context, reply replyFunc, mk func(replyFunc) event) error {
	answered := make(chan struct{})
	once := func(m any, e error) {
		defer close(answered)
		reply(m, e)
	}
	if err := a.call(ctx, func() error { a.step(mk(once)); return nil }); err != nil {
		return err
	}
	select {
	case <-answered:
		return nil
	case <-a.quit:
		select {
		case <-answered:
			return nil
		default:
			return a.notController()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// notController is the answer once the term has ended, naming the new
// controller when the fencing error told us.
func (a *Active) notController() error { return a.notControllerFor(a.Err()) }

// writeCtx bounds one etcd write.
func (a *Active) writeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.ctx, a.d.Settings.RequestTimeout)
}

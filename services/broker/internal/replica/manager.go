// Package replica is the broker's replica manager: the partitions this
// broker hosts, the produce and fetch paths on leaders, the follower
// fetchers, ISR maintenance and AlterPartition, and the control requests
// from the controller. The replication decisions themselves are made by the
// pure state machine in package partition; this package feeds it events and
// carries out what it decides, with the log store and the network.
//
// Goroutines: one per follower fetcher (per source broker and fetcher index),
// one ISR-expiration ticker, one AlterPartition sender; request handlers run
// on gRPC's goroutines and park on a replica's waiters.
//
// Lock order: Manager.mu (the partition map) before Replica.mu; a Replica's
// waiters and the fetchers' own locks are leaves, never held while taking
// another. Network calls are made with no lock held.
//
// Seams (seams.go): the logs (LogStore, Log), the network to peers and the
// controller (Transport) and time (Clock). Decision paths read time only
// from the Clock, so the package's tests drive every timeout by hand.
package replica

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/topicconfig"
)

// TP names a partition.
type TP = logstore.TopicPartition

// Options configures a Manager.
type Options struct {
	BrokerID int32
	Rack     string
	// Logs holds the partition logs; Store, when set, replaces it (tests).
	Logs  *logstore.Manager
	Store LogStore
	Meta  *metadata.Cache
	// Peers reaches other brokers and the controller; Transport, when set,
	// replaces it (tests).
	Peers     *Peers
	Transport Transport
	// BrokerEpoch returns this broker's current registration epoch (0 when
	// not registered, e.g. in tests without etcd).
	BrokerEpoch func() int64
	// AwaitRegistration refuses every controller request until BrokerEpoch
	// is set. A restarted broker waits for its previous incarnation's lease
	// to expire before it can register; meanwhile the controller still
	// pushes to that incarnation's address, and acting on those pushes
	// would make the new process lead on its predecessor's identity.
	AwaitRegistration bool
	// Static broker settings (flags); dynamic ones arrive in UpdateMetadata
	// and take precedence.
	Static map[string]string
	Logger *slog.Logger
	// Clock is the manager's time source (nil: the wall clock).
	Clock  Clock
	Tracer trace.Tracer
	Events EventSink
	Faults *Faults
	// Registry receives the broker's replication metrics; nil keeps them
	// unregistered.
	Registry prometheus.Registerer
	// LeaderFence, when set, is asked on every leader append (before it and
	// again before an acks=0/1 answer), while an acks=all write is parked,
	// and on every consumer read; its verdict refuses them (see Fence).
	// The broker fences itself while its registration lease is unconfirmed
	// (see the broker package); it reads the clock itself, at the call.
	LeaderFence func() Fence
	// LostLogs says logs of this broker may be gone: a log dir came back
	// empty (a replaced disk) or was left out of log.dirs. Until the
	// controller's full push of its roles has found a log for every
	// partition it leads or is in the ISR of, a partition without a log is
	// refused rather than created empty in those roles (see lostlogs.go).
	LostLogs bool
	// LostLogsSettled is called (on its own goroutine) once LostLogs no
	// longer applies, so the broker can forget it across restarts.
	LostLogsSettled func()
}

// Fence is the LeaderFence's verdict.
type Fence struct {
	// Err, when not nil, refuses leader work.
	Err error
	// LeaseSilent says etcd's silence is the only reason: the lease is
	// unconfirmed, never lost. A controller can elect another leader only
	// once etcd expired it, and a replica that follows the new leader stops
	// fetching here. So a partition whose in-sync followers all still fetch
	// from this leader (within vouchWindow) goes on taking acks=all writes
	// and serving consumers: an acks=all write commits only once those
	// followers hold it, so an election this leader has not heard of cannot
	// lose it (the new leader was one of them). acks=0/1 writes have no such
	// witness and stay refused. During an etcd outage for the whole cluster
	// nothing can be elected, the followers keep fetching, and acks=all
	// traffic goes on, as in Kafka's ZooKeeper mode.
	LeaseSilent bool
}

// EventSink receives replication events for dashboards (ISR changes,
// truncations, HW advances); nil drops them.
type EventSink interface {
	Event(e Event)
}

// Event is one thing that happened to a replica, in the words an operator
// greps for.
type Event struct {
	Time        time.Time
	Kind        string // isr-shrink, isr-expand, truncation, hw-advance, fenced
	TP          TP
	Reason      string
	LeaderEpoch int32
	ISR         []int32
	TraceID     string
}

// Manager hosts this broker's replicas.
type Manager struct {
	opts      Options
	log       *slog.Logger
	clock     Clock
	logs      LogStore
	transport Transport
	tracer    trace.Tracer
	// underMinISRLog spaces the warnings of writes refused for want of
	// in-sync replicas (underminisr.go).
	underMinISRLog underMinISRLog

	mu       lockorder.RWMutex[lockorder.ReplicaManager]
	replicas map[TP]*Replica
	// offline holds the partitions whose log dir went offline, and why
	// (guarded by mu): they answer KAFKA_STORAGE_ERROR until a restart.
	offline map[TP]error
	// lost: see lostlogs.go (guarded by mu).
	lost lostLogs

	// ctrlMu is held while a LeaderAndIsr, UpdateMetadata or StopReplica
	// is applied: one at a time, each checked against the newest
	// controller epoch again under it (control.go, lockControl).
	ctrlMu lockorder.Mutex[lockorder.ControlRequests]

	// laiMu guards lastLAI, the LeaderAndIsr applied last or being
	// applied: a new one waits for it, an identical one (a resend) gets
	// its answer (control.go).
	laiMu   lockorder.Mutex[lockorder.Leaf]
	lastLAI *leaderAndIsrCall

	broker   atomic.Pointer[topicconfig.BrokerConfig]
	fetchers *fetcherManager
	alter    *alterSender
	metrics  *metrics
	// throttles are the replication throttles (throttle.go).
	throttles throttles

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	// admitted, when set (by tests only), runs once a control request
	// has passed the fences and before it is applied: the
	// gap in which a newer controller's requests may overtake it.
	admitted func(kind string)
	// deletingStray, when set (by tests only), runs between the stray
	// sweep's last look at the controller epoch and a stray's deletion.
	deletingStray func(tp TP)
}

// New builds a Manager and starts its background goroutines.
func New(o Options) (*Manager, error) {
	if o.Clock == nil {
		o.Clock = WallClock{}
	}
	if o.Store == nil && o.Logs != nil {
		o.Store = logManager{o.Logs}
	}
	if o.Transport == nil && o.Peers != nil {
		o.Transport = peerTransport{o.Peers}
	}
	if o.BrokerEpoch == nil {
		o.BrokerEpoch = func() int64 { return 0 }
	}
	if o.Tracer == nil {
		o.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if o.Faults == nil {
		o.Faults = NewFaults(false)
	}
	m := &Manager{
		opts:      o,
		log:       logging.OrDiscard(o.Logger),
		clock:     o.Clock,
		logs:      o.Store,
		transport: o.Transport,
		tracer:    o.Tracer,
		replicas:  map[TP]*Replica{}, offline: map[TP]error{},
		stop: make(chan struct{}),
	}
	m.lost.active = o.LostLogs
	m.throttles = newThrottles(o.Clock.Now)
	bc, err := topicconfig.ResolveBroker(o.Static)
	if err != nil {
		return nil, err
	}
	m.broker.Store(&bc)
	m.metrics = newMetrics(m, o.Registry)
	m.fetchers = newFetcherManager(m)
	m.alter = newAlterSender(m)
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.alter.run(m.stop) }()
	go func() { defer m.wg.Done(); m.isrExpirationLoop() }()
	return m, nil
}

// Fenced says whether this broker may answer as a source of metadata: nil
// when it is not fenced, or when etcd's silence is the only reason and its
// in-sync followers vouch for every partition it leads (it leads at least
// one). Else a fenced broker hears from no controller, and what it knows
// may be stale.
func (m *Manager) Fenced() error {
	f := m.fence()
	if f.Err == nil || !f.LeaseSilent {
		return f.Err
	}
	now, led := m.now(), 0
	for _, r := range m.Replicas() {
		r.mu.Lock()
		leader, vouched := r.state.IsLeader(), m.vouchedLocked(r, now)
		r.mu.Unlock()
		if !leader {
			continue
		}
		if !vouched {
			return f.Err
		}
		led++
	}
	if led == 0 {
		return f.Err
	}
	return nil
}

// MayLead reports whether this broker may act as r's leader now: it leads
// r and is not fenced, or is fenced by etcd's silence alone and r's in-sync
// followers vouch for it (the group coordinator's check: its writes are
// acks=all).
func (m *Manager) MayLead(r *Replica) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.IsLeader() && m.fencedLocked(r, m.now()) == nil
}

// LeadingSince is the leader epoch in which this broker became r's leader,
// when it leads r now and may do leader work (MayLead). Later epochs of the
// same continuous leadership (an ISR change the controller made) leave it
// as it is: nothing another leader wrote can be in the log between them.
func (m *Manager) LeadingSince(r *Replica) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.state.IsLeader() || m.fencedLocked(r, m.now()) != nil {
		return 0, false
	}
	return r.leaderSince, true
}

// fence is the LeaderFence's verdict, none when there is no fence.
func (m *Manager) fence() Fence {
	if f := m.opts.LeaderFence; f != nil {
		return f()
	}
	return Fence{}
}

// fencedLocked is the fence for leader work on r that its followers can
// vouch for (an acks=all write, a consumer read); r.mu held.
func (m *Manager) fencedLocked(r *Replica, now time.Time) error {
	f := m.fence()
	if f.Err == nil || (f.LeaseSilent && m.vouchedLocked(r, now)) {
		return nil
	}
	return f.Err
}

// vouchedLocked reports whether r leads and every other member of its ISR
// fetched from it within vouchWindow; r.mu held.
func (m *Manager) vouchedLocked(r *Replica, now time.Time) bool {
	window := time.Duration(m.broker.Load().ReplicaFetchWaitMaxMs)*time.Millisecond + vouchSlack
	return r.state.InSyncFollowersFetchedSince(now.Add(-window).UnixMilli())
}

// vouchSlack is added to replica.fetch.wait.max.ms, the longest an idle
// follower's fetch is parked here before it sends the next: a round trip
// and a busy machine's scheduling. A follower that left for another leader
// is noticed that much later; a false "left" only refuses writes.
const vouchSlack = time.Second

// WakeParkedProduce wakes every parked acks=all write, to check the fence
// again: the broker calls it while fenced, since a write parked at a leader
// its followers left would otherwise wait for its timeout.
func (m *Manager) WakeParkedProduce() {
	for _, r := range m.Replicas() {
		r.wakeHW()
	}
}

// BrokerConfig is the effective broker configuration (static + dynamic).
func (m *Manager) BrokerConfig() topicconfig.BrokerConfig { return *m.broker.Load() }

// Close stops fetchers and background work. Parked requests are woken and
// answer NOT_LEADER_OR_FOLLOWER.
func (m *Manager) Close() {
	m.stopOnce.Do(func() { close(m.stop) })
	m.fetchers.close()
	m.wg.Wait()
	m.mu.RLock()
	for _, r := range m.replicas {
		r.wake()
	}
	m.mu.RUnlock()
}

// Replica returns a hosted replica.
func (m *Manager) Replica(tp TP) (*Replica, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.replicas[tp]
	return r, ok
}

// Replicas lists the hosted replicas ordered by topic and partition.
func (m *Manager) Replicas() []*Replica {
	m.mu.RLock()
	out := make([]*Replica, 0, len(m.replicas))
	for _, r := range m.replicas {
		out = append(out, r)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].tp.Topic != out[j].tp.Topic {
			return out[i].tp.Topic < out[j].tp.Topic
		}
		return out[i].tp.Partition < out[j].tp.Partition
	})
	return out
}

// HighWatermark serves the log manager's checkpoint and retention.
func (m *Manager) HighWatermark(tp TP) (int64, bool) {
	r, ok := m.Replica(tp)
	if !ok {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.HighWatermark(), true
}

// notHosted answers for a partition this broker does not host: the leader
// hint when metadata knows the partition, else UNKNOWN_TOPIC_OR_PARTITION.
func (m *Manager) notHosted(tp TP) error {
	m.mu.RLock()
	cause, off := m.offline[tp]
	m.mu.RUnlock()
	if off {
		e := kerr.New(kerr.KafkaStorageError, "broker %d cannot serve %s-%d: %v", m.opts.BrokerID, tp.Topic, tp.Partition, cause)
		e.Leader = m.opts.Meta.LeaderHint(metadata.TP(tp))
		return e
	}
	if hint := m.opts.Meta.LeaderHint(metadata.TP(tp)); hint != nil {
		e := kerr.New(kerr.NotLeaderOrFollower, "broker %d does not host %s-%d; leader is %d", m.opts.BrokerID, tp.Topic, tp.Partition, hint.ID)
		e.Leader = hint
		return e
	}
	return kerr.New(kerr.UnknownTopicOrPartition, "%s-%d is not a known partition", tp.Topic, tp.Partition)
}

// hosted returns the replica or the error to answer with.
func (m *Manager) hosted(tp TP) (*Replica, error) {
	if r, ok := m.Replica(tp); ok {
		return r, nil
	}
	return nil, m.notHosted(tp)
}

// withLeaderHint adds the current leader to NOT_LEADER answers.
func (m *Manager) withLeaderHint(tp TP, err error) error {
	e := kerr.As(err)
	if e == nil {
		return err
	}
	// Which answers carry a leader hint (kerr.Error.Leader's contract), not
	// a retry decision.
	switch e.Code {
	case kerr.NotLeaderOrFollower, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch:
	default:
		return err
	}
	hint := m.opts.Meta.LeaderHint(metadata.TP(tp))
	switch {
	case e.Leader == nil:
		e.Leader = hint
	case e.Leader.Address == "":
		// The state machine knows the leader's id and epoch; the address
		// comes from the cluster metadata.
		if b, ok := m.opts.Meta.Broker(e.Leader.ID); ok {
			e.Leader.Address = b.Address
		}
	}
	return e
}

// brokersView answers the state machine's ISR-eligibility questions from
// the metadata cache, with the controller's rule (KIP-841): a broker is
// eligible when it is registered and not in controlled shutdown. Proposing
// a shutting-down broker would only be refused (INELIGIBLE_REPLICA), on
// every one of its fetches, and each refused proposal blocks a shrink while
// it is in flight.
type brokersView struct{ meta *metadata.Cache }

func (b brokersView) IsrEligible(id int32) bool {
	br, ok := b.meta.Broker(id)
	return ok && !br.ShuttingDown
}

func (b brokersView) BrokerEpoch(id int32) (int64, bool) {
	br, ok := b.meta.Broker(id)
	if !ok || br.Epoch == 0 {
		return 0, false
	}
	return br.Epoch, true
}

func (m *Manager) emit(e Event) {
	if m.opts.Events != nil {
		if e.Time.IsZero() {
			e.Time = m.now()
		}
		m.opts.Events.Event(e)
	}
}

func (m *Manager) truncationMode() partition.TruncationMode {
	mode, err := partition.ParseTruncationMode(m.BrokerConfig().ReplicaTruncationMode)
	if err != nil {
		return partition.TruncateLeaderEpoch
	}
	return mode
}

// now reads the manager's clock.
func (m *Manager) now() time.Time { return m.clock.Now() }

// closing reports whether the manager is closing.
func (m *Manager) closing() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// sleep waits d or until the manager stops or ctx ends; false when stopped.
func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	t := m.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-m.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

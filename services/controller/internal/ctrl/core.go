package ctrl

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/controller/internal/sender"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// core is the term's decision state and the decisions made on it: a value
// with no goroutines and no I/O. Events go in through handle (or the entry
// methods the shell calls directly); what the term must do comes out as
// effects in out, in order: etcd writes, pushes to brokers, senders to start
// or stop, answers, cluster events, step-down. The shell (Active, on the
// loop goroutine) executes them in that order and feeds each write's outcome
// back as evWriteResult.
//
// Write, then push: a decision that writes emits effWriteStates and stops;
// the rest of it (pushes, answers) is a continuation that runs when the
// write's result comes back, and only if the write succeeded. So at most one
// write is in flight, and a write is always the last effect of a batch
// (emit panics otherwise).
type core struct {
	self  *commonv1.Node
	epoch int32
	log   *slog.Logger
	pol   policy

	clusterID     string
	topics        map[string]*topic
	brokers       map[int32]*broker
	seen          map[int32]metastore.BrokerInfo
	departedEpoch map[int32]int64
	// offlineDirs are each live broker's offline log dirs as its session
	// last reported them; their replicas count as offline (logdirs.go).
	offlineDirs map[int32][]*controlv1.OfflineLogDir
	// sessions are the open BrokerSession streams, failing the fast-failover
	// checks of brokers whose session broke (session.go), progress each
	// replica's last progress report.
	sessions map[int32]*session
	failing  map[int32]*failCheck
	failGen  uint64
	// closedAhead is, per broker, the epoch of a session that broke before
	// the controller had seen that incarnation's registration: the check
	// its break should have armed is armed when the registration arrives.
	closedAhead map[int32]int64
	// handoffs are the voluntary moves waiting for their leader to yield
	// (handoff.go), by id.
	handoffs   map[uint64]*handoff
	handoffSeq uint64
	// completing are the reassignments whose completion waits for their
	// leader to yield (reassign.go).
	completing map[*partition]bool
	progress   map[progressKey]*controlv1.ReplicaProgress
	// leaderEnd is each partition's log end offset as its leader last
	// reported it, kept after that broker departs: what an unclean
	// election from an empty log loses (logdirs.go).
	leaderEnd  map[election.TopicPartition]reportedEnd
	stateDirty bool // partitions or brokers changed: recount, notify
	viewDirty  bool // only progress or events changed: notify
	// tracking marks the pushes emitted while set as tracked; grouping puts
	// them in an ack group (effAwaitAcks), ackGroup numbers the groups.
	// groupOnly, when set, limits grouping to the LeaderAndIsr sent to
	// those brokers.
	tracking  bool
	grouping  uint64
	groupOnly map[int32]bool
	ackGroup  uint64

	// brokerConfigs are the dynamic broker config entities as etcd holds
	// them, staticBroker the controller's static broker settings under
	// them (effective.go).
	brokerConfigs map[string]map[string]string
	staticBroker  map[string]string
	// users are the users' SCRAM credentials as etcd holds them (users.go).
	users map[string]metastore.UserCredentials
	// invalidConfigs is, per topic (or "brokers"), the invalid keys last
	// warned of, so a push does not repeat the warning (effective.go).
	invalidConfigs map[string]string
	// rng draws placement's random choices (a new topic's or partitions'
	// start broker and follower shift). It is given to newCore: the shell
	// seeds it per term, scripts with a fixed seed, so the choices are part
	// of the core's deterministic input.
	rng *rand.Rand

	// ended is why the term ended; nil while it is active.
	ended error
	// wait is the write or read in flight; its result resumes it.
	wait *waiting
	out  []effect
}

// waiting is the I/O in flight and the rest of the decision that made it.
type waiting struct {
	what   string
	resume func(event)
}

// policy is what decisions read from the configuration layers the shell
// keeps (dynamic configs in etcd over the static ones). Each is a pure
// function of loop-owned state; nil means defaults (tests).
type policy struct {
	// unclean is unclean.leader.election.enable for a topic (F20).
	unclean func(*topic) bool
	// topicConfigs is a topic's effective configuration as one broker
	// gets it in LeaderAndIsr and UpdateMetadata.
	topicConfigs func(t *topic, broker int32) map[string]string
	// brokerConfigs is the dynamic broker configuration UpdateMetadata
	// carries to one broker.
	brokerConfigs func(broker int32) map[string]string
	// rebalance is the auto leader rebalance configuration (F21).
	rebalance func() rebalancePolicy
	// grace is how long a broker whose session broke has to come back
	// before fast failover may declare it dead; 0 leaves it to its lease.
	grace time.Duration
}

// rebalancePolicy is auto.leader.rebalance.enable,
// leader.imbalance.per.broker.percentage and
// leader.imbalance.check.interval.seconds.
type rebalancePolicy struct {
	enabled bool
	percent int
	every   time.Duration
}

func newCore(self *commonv1.Node, epoch int32, log *slog.Logger, pol policy, rng *rand.Rand) *core {
	return &core{
		rng:           rng,
		brokerConfigs: map[string]map[string]string{},
		users:         map[string]metastore.UserCredentials{},
		self:          self,
		epoch:         epoch,
		log:           log,
		pol:           pol,
		topics:        map[string]*topic{},
		brokers:       map[int32]*broker{},
		seen:          map[int32]metastore.BrokerInfo{},
		departedEpoch: map[int32]int64{},
		offlineDirs:   map[int32][]*controlv1.OfflineLogDir{},
		leaderEnd:     map[election.TopicPartition]reportedEnd{},
		sessions:      map[int32]*session{},
		failing:       map[int32]*failCheck{},
		closedAhead:   map[int32]int64{},
		handoffs:      map[uint64]*handoff{},
		completing:    map[*partition]bool{},
		progress:      map[progressKey]*controlv1.ReplicaProgress{},
	}
}

// Events.

type event interface{ coreEvent() }

// evBrokerRegistered is a broker registration seen in etcd.
type evBrokerRegistered struct{ info metastore.Broker }

// evBrokerDeparted is a registration gone (lease expired or revoked); epoch
// 0 means whichever incarnation is live.
type evBrokerDeparted struct {
	id    int32
	epoch int64
	why   string
}

// evAlterPartition is a partition leader's ISR change request.
type evAlterPartition struct {
	req   *controlv1.AlterPartitionRequest
	reply replyFunc
}

// evControlledShutdown is a broker asking to shut down (one step of it).
type evControlledShutdown struct {
	req   *controlv1.ControlledShutdownRequest
	reply replyFunc
}

// evWriteResult is the outcome of an effWriteStates. resigning says the
// term's own shutdown cancelled it.
type evWriteResult struct {
	res       metastore.UpdateResult
	err       error
	resigning bool
}

// evAssignmentResult is the outcome of an effWriteAssignment.
type evAssignmentResult struct {
	res       metastore.AssignmentResult
	err       error
	resigning bool
}

// evTopicRead is the outcome of an effReadTopic.
type evTopicRead struct {
	topic *metastore.Topic
	err   error
}

// evLoaded is the cluster as the term read it at election; the answer (nil
// or the write error that ended the term) comes once the state is written
// and pushed.
type evLoaded struct {
	clusterID string
	brokers   map[int32]metastore.Broker
	topics    map[string]*metastore.Topic
	reply     replyFunc
}

// evTopicConfig is a topic's overrides changed (written by this controller
// or seen in etcd).
type evTopicConfig struct {
	topic string
	cfg   map[string]string
}

// evBrokerConfig is a dynamic broker config entity changed (seen in etcd).
type evBrokerConfig struct {
	entity string
	cfg    map[string]string
}

// evDeleteTopics is DeleteTopics.
type evDeleteTopics struct {
	req   *adminv1.DeleteTopicsRequest
	reply replyFunc
}

// evDeletionAcked is a deleting topic's StopReplica requests answered (or
// the wait for them bounded).
type evDeletionAcked struct{ t *topic }

// evMetaWriteResult is the outcome of an effMarkDeletion or effDeleteTopic.
type evMetaWriteResult struct {
	err       error
	resigning bool
}

// evCreateTopics is CreateTopics.
type evCreateTopics struct {
	req   *adminv1.CreateTopicsRequest
	reply replyFunc
}

// evCreateOffsetsTopic is a broker asking for the offsets topic.
type evCreateOffsetsTopic struct {
	req   *controlv1.CreateOffsetsTopicRequest
	reply replyFunc
}

// evCreatePartitions is CreatePartitions.
type evCreatePartitions struct {
	req   *adminv1.CreatePartitionsRequest
	reply replyFunc
}

// evAlterConfigs is AlterConfigs.
type evAlterConfigs struct {
	req   *adminv1.AlterConfigsRequest
	reply replyFunc
}

// evCreateTopicResult is the outcome of an effCreateTopic.
type evCreateTopicResult struct {
	topic     *metastore.Topic
	err       error
	resigning bool
}

// evElectLeaders is ElectLeaders (KIP-460).
type evElectLeaders struct {
	req   *adminv1.ElectLeadersRequest
	reply replyFunc
}

// evTimer is a timer the core armed (effArmTimer) firing, with the gen it
// was armed with.
type evTimer struct {
	key timerKey
	gen uint64
}

// timerKind names the core's timers.
type timerKind int

const (
	// timerRebalance is the auto leader rebalance check (F21).
	timerRebalance timerKind = iota + 1
	// timerGrace is a broker's fast-failover grace period.
	timerGrace
	// timerReassign looks again at the reassignments whose target is in
	// the ISR (reassign.go): after a state change no AlterPartition made,
	// and after a completion that failed.
	timerReassign
)

// timerKey names one timer; arming a key replaces its previous timer.
type timerKey struct {
	kind   timerKind
	broker int32
}

// evSessionOpened is a BrokerSession stream's first message; the answer is
// the *session.
type evSessionOpened struct {
	first *controlv1.BrokerSessionRequest
	reply replyFunc
}

// evSessionReport is a later message of an open session, received at now
// (Unix ms; events without a time get it).
type evSessionReport struct {
	s   *session
	m   *controlv1.BrokerSessionRequest
	now int64
}

// evSessionClosed is a session's stream ending.
type evSessionClosed struct {
	s     *session
	cause error
}

// evProbeResult is the outcome of an effProbe.
type evProbeResult struct {
	id                         int32
	gen                        uint64
	healthy, refused, replaced bool
	why                        string
}

// evYielded is the outcome of an effYield: nil when the leader yielded.
type evYielded struct {
	id  uint64
	err error
}

// evRevokeResult is the outcome of an effRevokeBroker.
type evRevokeResult struct {
	err       error
	resigning bool
}

// evReassign is AlterPartitionReassignments.
type evReassign struct {
	req   *adminv1.AlterPartitionReassignmentsRequest
	reply replyFunc
}

func (evBrokerRegistered) coreEvent()   {}
func (evYielded) coreEvent()            {}
func (evBrokerDeparted) coreEvent()     {}
func (evAlterPartition) coreEvent()     {}
func (evControlledShutdown) coreEvent() {}
func (evWriteResult) coreEvent()        {}
func (evAssignmentResult) coreEvent()   {}
func (evTopicRead) coreEvent()          {}
func (evReassign) coreEvent()           {}
func (evElectLeaders) coreEvent()       {}
func (evTimer) coreEvent()              {}
func (evLoaded) coreEvent()             {}
func (evTopicConfig) coreEvent()        {}
func (evBrokerConfig) coreEvent()       {}
func (evDeleteTopics) coreEvent()       {}
func (evDeletionAcked) coreEvent()      {}
func (evMetaWriteResult) coreEvent()    {}
func (evSessionOpened) coreEvent()      {}
func (evSessionReport) coreEvent()      {}
func (evSessionClosed) coreEvent()      {}
func (evProbeResult) coreEvent()        {}
func (evRevokeResult) coreEvent()       {}
func (evCreateTopics) coreEvent()       {}
func (evCreateOffsetsTopic) coreEvent() {}
func (evCreatePartitions) coreEvent()   {}
func (evAlterConfigs) coreEvent()       {}
func (evCreateTopicResult) coreEvent()  {}

// replyFunc takes a request's answer; the shell hands it to the caller.
type replyFunc func(any, error)

// Effects.

type effect interface{ coreEffect() }

// effWriteStates asks for partition states to be written with
// compare-and-set in the session's fenced transactions
// (metastore.Session.UpdatePartitionStates). Its outcome must come back as
// evWriteResult before anything else is handled.
type effWriteStates struct {
	what    string
	updates []metastore.PartitionUpdate
}

// effWriteAssignment asks for a topic's assignment and one partition's
// state to be written in one fenced transaction
// (metastore.Session.UpdateAssignment); its outcome comes back as
// evAssignmentResult.
type effWriteAssignment struct {
	what   string
	update metastore.AssignmentUpdate
}

// effReadTopic asks for a topic to be read again from etcd after its keys
// changed under the controller; the answer comes back as evTopicRead.
type effReadTopic struct{ name string }

// effMarkDeletion marks a topic for deletion in etcd (a fenced write); the
// outcome comes back as evMetaWriteResult.
type effMarkDeletion struct{ topic string }

// effCreateTopic creates a topic's keys (a fenced write that fails if the
// topic exists); the outcome comes back as evCreateTopicResult.
type effCreateTopic struct {
	what  string
	topic metastore.NewTopic
}

// effPutConfig writes a topic's overrides (topic set) or a dynamic broker
// config entity (a fenced write); the outcome comes back as
// evMetaWriteResult.
type effPutConfig struct {
	topic, entity string
	cfg           map[string]string
}

// effDeleteTopic removes a topic's keys (a fenced write); the outcome comes
// back as evMetaWriteResult.
type effDeleteTopic struct{ topic string }

// effAwaitAcks asks the shell to wait, off the loop and bounded, for the
// pushes of an ack group to be answered, then to send then.
type effAwaitAcks struct {
	group uint64
	then  event
}

// effTopicGone closes a deleted topic's done channel.
type effTopicGone struct{ t *topic }

// effPush hands one request to a broker's sender. track asks the shell to
// keep its outcome for the request being answered (ElectLeaders waits for
// the new leaders to confirm, the load for the state to be delivered).
type effPush struct {
	to    int32
	req   sender.Request
	track bool
	group uint64 // an ack group (effAwaitAcks), 0 for none
}

// effArmTimer (re)arms one of the core's timers; when it fires the shell
// sends evTimer with gen.
type effArmTimer struct {
	key   timerKey
	after time.Duration
	gen   uint64
}

// effStopTimer stops a timer.
type effStopTimer struct{ key timerKey }

// effKick ends a session replaced by a newer one of the same broker.
type effKick struct{ s *session }

// effProbe starts a fast-failover probe of a broker incarnation at addr:
// a health check of its incarnation's service, then a fresh dial; the
// outcome comes back as evProbeResult.
type effProbe struct {
	id      int32
	epoch   int64
	addr    string
	timeout time.Duration
	gen     uint64
}

// effYield asks a leader to yield partitions ahead of a voluntary move
// (handoff.go): the shell queues the request behind the broker's other
// control requests and posts evYielded with its outcome, or with
// REQUEST_TIMED_OUT after the request timeout.
type effYield struct {
	to  int32
	id  uint64
	req *controlv1.YieldLeadershipRequest
}

// effRevokeBroker revokes a broker incarnation's registration lease (a
// fenced write); the outcome comes back as evRevokeResult.
type effRevokeBroker struct {
	id    int32
	epoch int64
}

// effBrokerUp starts a sender for a new broker incarnation.
type effBrokerUp struct{ info metastore.Broker }

// effBrokerGone stops a departed incarnation's sender and forgets what its
// session reported.
type effBrokerGone struct{ info metastore.Broker }

// effEvent adds a ClusterEvent (without its time) to the event ring.
type effEvent struct{ ev *controlv1.ClusterEvent }

// effDecision is a written partition decision to count, trace and add to
// the event ring (record).
type effDecision struct {
	c        change
	old, now metastore.PartitionState
	kind     controlv1.EventKind
	// label is the elections metric's cause, "" when not an election.
	label   cause
	unclean bool
	// shrunk is the ISR shrinks metric's cause when the controller took
	// members out of the ISR (a broker gone, a controlled shutdown),
	// "" otherwise: a leader's own shrinks are counted on the leader.
	shrunk cause
	// elected says a live leader was elected (the election time metric).
	elected bool
	ev      *controlv1.ClusterEvent
}

// effAnswer answers a request.
type effAnswer struct {
	reply replyFunc
	resp  any
	err   error
}

// effStepDown ends the term.
type effStepDown struct{ cause error }

func (effWriteStates) coreEffect()     {}
func (effWriteAssignment) coreEffect() {}
func (effReadTopic) coreEffect()       {}
func (effPush) coreEffect()            {}
func (effBrokerUp) coreEffect()        {}
func (effBrokerGone) coreEffect()      {}
func (effEvent) coreEffect()           {}
func (effDecision) coreEffect()        {}
func (effAnswer) coreEffect()          {}
func (effStepDown) coreEffect()        {}
func (effArmTimer) coreEffect()        {}
func (effStopTimer) coreEffect()       {}
func (effKick) coreEffect()            {}
func (effProbe) coreEffect()           {}
func (effYield) coreEffect()           {}
func (effRevokeBroker) coreEffect()    {}
func (effMarkDeletion) coreEffect()    {}
func (effDeleteTopic) coreEffect()     {}
func (effAwaitAcks) coreEffect()       {}
func (effTopicGone) coreEffect()       {}
func (effCreateTopic) coreEffect()     {}
func (effPutConfig) coreEffect()       {}

// handle runs one event's decisions; their effects are appended to out.
func (c *core) handle(ev event) {
	switch ev.(type) {
	case evWriteResult, evAssignmentResult, evTopicRead, evRevokeResult, evMetaWriteResult, evCreateTopicResult:
		w := c.wait
		if w == nil {
			panic(fmt.Sprintf("ctrl: %T with nothing in flight", ev))
		}
		c.wait = nil
		w.resume(ev)
		return
	}
	if c.wait != nil {
		panic(fmt.Sprintf("ctrl: event %T while %s is in flight", ev, c.wait.what))
	}
	if c.stopping() {
		return
	}
	switch ev := ev.(type) {
	case evBrokerRegistered:
		c.brokerRegistered(ev.info)
	case evBrokerDeparted:
		c.brokerDeparted(ev.id, ev.epoch, ev.why, nil)
	case evAlterPartition:
		c.alterPartition(ev.req, ev.reply)
	case evControlledShutdown:
		c.controlledShutdown(ev.req, ev.reply)
	case evReassign:
		c.alterReassignments(ev.req, ev.reply)
	case evElectLeaders:
		c.electLeaders(ev.req, ev.reply)
	case evLoaded:
		c.loaded(ev)
	case evTopicConfig:
		c.topicConfigChanged(ev.topic, ev.cfg, func() {})
	case evDeleteTopics:
		c.deleteTopics(ev.req, ev.reply)
	case evDeletionAcked:
		c.finishDeletion(ev.t)
	case evBrokerConfig:
		c.brokerConfigChanged(ev.entity, ev.cfg, func() {})
	case evUsersChanged:
		c.usersChanged(ev.user, ev.creds)
	case evCreateTopics:
		c.createTopics(ev.req, ev.reply)
	case evCreateOffsetsTopic:
		c.createOffsetsTopic(ev.req, ev.reply)
	case evCreatePartitions:
		c.createPartitions(ev.req, ev.reply)
	case evAlterConfigs:
		c.alterConfigs(ev.req, ev.reply)
	case evTimer:
		switch ev.key.kind {
		case timerRebalance:
			c.checkRebalance()
		case timerGrace:
			c.graceEnded(ev.key.broker, ev.gen)
		case timerReassign:
			c.retryReassignments()
		default:
			panic(fmt.Sprintf("ctrl: unknown timer %d", ev.key.kind))
		}
	case evSessionOpened:
		c.openSession(ev.first, ev.reply)
	case evSessionReport:
		c.report(ev.s, ev.m, ev.now)
	case evSessionClosed:
		c.sessionClosed(ev.s, ev.cause)
	case evProbeResult:
		c.probed(ev)
	case evYielded:
		c.yielded(ev.id, ev.err)
	default:
		panic(fmt.Sprintf("ctrl: unknown event %T", ev))
	}
}

// take returns the effects emitted so far and clears them.
func (c *core) take() []effect {
	out := c.out
	c.out = nil
	return out
}

func (c *core) emit(e effect) {
	if c.wait != nil {
		panic(fmt.Sprintf("ctrl: effect %T emitted while %s is in flight (write, then push)", e, c.wait.what))
	}
	c.out = append(c.out, e)
}

// await emits the write or read e and parks the rest of the decision,
// resume, until its result arrives.
func (c *core) await(e effect, what string, resume func(event)) {
	c.emit(e)
	c.wait = &waiting{what: what, resume: resume}
}

func (c *core) answer(reply replyFunc, resp any, err error) {
	if reply != nil {
		c.emit(effAnswer{reply: reply, resp: resp, err: err})
	}
}

// stopping reports whether the term is ending; decisions check it after a
// write and stop before pushing.
func (c *core) stopping() bool { return c.ended != nil }

// stepDown ends the term after the current event.
func (c *core) stepDown(cause error) {
	if c.ended != nil {
		return
	}
	c.ended = cause
	c.emit(effStepDown{cause: cause})
}

// fail ends the term after a failed write: the outcome in etcd is unknown or
// the write was fenced, so the next controller must reload (F22).
func (c *core) fail(what string, err error, resigning bool) {
	if resigning {
		c.stepDown(errResigning) // our own shutdown cancelled the write
		return
	}
	if errors.Is(err, metastore.ErrControllerMoved) {
		c.log.Error("Controller moved: fenced write refused; this controller is no longer active",
			"write", what, "err", err)
		c.stepDown(err)
		return
	}
	c.stepDown(fmt.Errorf("%s: metadata write failed: %w", what, err))
}

// refusedOrFatal sorts a failed write: etcd's refusal of this one request
// (a kerr code such as TOPIC_ALREADY_EXISTS) is returned as false and the
// term goes on; anything else (fenced, timed out, unknown) ends the term
// and returns true.
func (c *core) refusedOrFatal(what string, err error, resigning bool) bool {
	// About the controller's own term, not about a caller's retry: kept
	// out of the kerr table.
	switch kerr.CodeOf(err) {
	case kerr.NotController, kerr.UnknownServerError:
		c.fail(what, err, resigning)
		return true
	}
	return false
}

// notControllerFor is NOT_CONTROLLER for a term ended by cause, naming the
// new controller when the fencing error told us.
func (c *core) notControllerFor(cause error) error {
	var moved *metastore.ControllerMovedError
	if errors.As(cause, &moved) {
		if ke := kerr.As(moved.Unwrap()); ke != nil {
			return ke
		}
	}
	return kerr.New(kerr.NotController, "controller %d is no longer active (epoch %d ended)", c.self.Id, c.epoch)
}

// emitEvent adds one of the controller's own events to the ring.
func (c *core) emitEvent(kind controlv1.EventKind, f func(*controlv1.ClusterEvent)) {
	ev := &controlv1.ClusterEvent{Kind: kind, NodeId: c.self.Id}
	if f != nil {
		f(ev)
	}
	c.emit(effEvent{ev: ev})
}

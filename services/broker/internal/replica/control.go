package replica

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// checkControlRequest applies the fences every controller request passes:
// the controller epoch (F22) and the target broker epoch (KIP-380: a request
// meant for an earlier incarnation of this broker is refused).
func (m *Manager) checkControlRequest(controllerEpoch int32, brokerEpoch int64) error {
	mine := m.opts.BrokerEpoch()
	if mine == 0 && m.opts.AwaitRegistration {
		// Kafka serves no request before its registration either. The
		// controller retries this answer: a push meant for the new
		// registration lands once it is in place, one meant for the
		// previous incarnation is then refused as stale.
		return kerr.New(kerr.BrokerNotAvailable, "broker %d is not registered yet (request for broker epoch %d)", m.opts.BrokerID, brokerEpoch)
	}
	// An older target epoch is for a previous incarnation; a newer one is
	// fine (the controller may push before our registration call returns).
	if brokerEpoch != 0 && mine != 0 && brokerEpoch < mine {
		return kerr.New(kerr.StaleBrokerEpoch, "request for broker epoch %d, this broker is at epoch %d", brokerEpoch, mine)
	}
	if err := m.opts.Meta.CheckControllerEpoch(controllerEpoch); err != nil {
		m.metrics.staleController.Inc()
		m.log.Warn("refusing a request from a stale controller", "controller_epoch", controllerEpoch,
			"latest", m.opts.Meta.ControllerEpoch())
		m.emit(Event{Kind: "fenced", Reason: err.Error()})
		return err
	}
	return nil
}

// noteAdmitted marks the point between a control request's fences and its
// application, for tests that let a newer controller overtake it there.
func (m *Manager) noteAdmitted(kind string) {
	if m.admitted != nil {
		m.admitted(kind)
	}
}

// lockControl takes the lock under which control requests are applied and
// checks the fences again under it. The first check, before it, records a
// newer controller's epoch at once (a call to a succeeded one is given up:
// NewerController) and refuses a stale request without waiting behind
// another's application. But gRPC handlers run side by side: a request
// that passed it may still be overtaken, before the lock, by a newer
// controller's, and applied after it would undo it (its configs, a
// deletion of what it created). Checked again under the lock, it is
// refused instead; once the lock is held, no newer controller's request is
// applied until it is done (Kafka checks and applies under one lock,
// replicaStateChangeLock).
func (m *Manager) lockControl(controllerEpoch int32, brokerEpoch int64) (unlock func(), err error) {
	m.ctrlMu.Lock()
	if err := m.checkControlRequest(controllerEpoch, brokerEpoch); err != nil {
		m.ctrlMu.Unlock()
		return nil, err
	}
	return m.ctrlMu.Unlock, nil
}

// succeededController is the answer to a request of controllerEpoch, which
// passed the fences, when a newer controller's request was admitted since:
// gRPC handlers run side by side, so the newer one may have been applied
// first, and applying the older one now would undo it (Kafka checks and
// applies under one lock, replicaStateChangeLock). nil while controllerEpoch
// is still the newest seen.
func (m *Manager) succeededController(controllerEpoch int32) error {
	newest := m.opts.Meta.ControllerEpoch()
	if controllerEpoch >= newest {
		return nil
	}
	return kerr.New(kerr.StaleControllerEpoch, "controller epoch %d was succeeded by %d before its request was applied",
		controllerEpoch, newest)
}

// LeaderAndIsr applies the controller's leadership decisions for this
// broker's replicas: creating logs as needed, becoming leader or follower,
// recording new leader epochs, and (re)starting fetchers.
func (m *Manager) LeaderAndIsr(req *controlv1.LeaderAndIsrRequest) (*controlv1.LeaderAndIsrResponse, error) {
	if err := m.checkControlRequest(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	m.noteAdmitted("LeaderAndIsr")
	m.laiMu.Lock()
	last := m.lastLAI
	if last != nil && proto.Equal(last.req, req) {
		// The controller's resend of the request applied last (or still
		// being applied): its attempt timed out, not the request. It gets
		// the first application's answer once that is done; applying it
		// again would repeat the work behind which the resend queued.
		m.laiMu.Unlock()
		m.metrics.leaderAndIsrResends.Inc()
		<-last.done
		return last.resp, last.err
	}
	cur := &leaderAndIsrCall{req: req, done: make(chan struct{})}
	m.lastLAI = cur
	m.laiMu.Unlock()
	if last != nil {
		<-last.done // one application at a time, in arrival order
	}
	cur.resp, cur.err = m.applyLeaderAndIsrOfNewest(req)
	close(cur.done)
	return cur.resp, cur.err
}

// applyLeaderAndIsrOfNewest applies req under the control requests' lock,
// unless a newer controller's request was admitted since its fences.
func (m *Manager) applyLeaderAndIsrOfNewest(req *controlv1.LeaderAndIsrRequest) (*controlv1.LeaderAndIsrResponse, error) {
	unlock, err := m.lockControl(req.GetControllerEpoch(), req.GetBrokerEpoch())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.applyLeaderAndIsr(req)
}

// leaderAndIsrCall is one LeaderAndIsr being applied, or the last applied:
// resp and err are set before done is closed.
type leaderAndIsrCall struct {
	req  *controlv1.LeaderAndIsrRequest
	done chan struct{}
	resp *controlv1.LeaderAndIsrResponse
	err  error
}

// forgetAppliedLeaderAndIsr drops the last LeaderAndIsr once applied: the
// controller sends another request only after that one was answered (one
// queue per broker), so a LeaderAndIsr equal to it from now on is a new
// request, to be applied (after a StopReplica it may create the replica
// again).
func (m *Manager) forgetAppliedLeaderAndIsr() {
	m.laiMu.Lock()
	defer m.laiMu.Unlock()
	if last := m.lastLAI; last != nil {
		select {
		case <-last.done:
			m.lastLAI = nil
		default:
		}
	}
}

// applyLeaderAndIsr is LeaderAndIsr's work on a request that passed the
// fences, under ctrlMu.
func (m *Manager) applyLeaderAndIsr(req *controlv1.LeaderAndIsrRequest) (*controlv1.LeaderAndIsrResponse, error) {
	start := m.now()
	defer m.fetchers.batch()()
	for _, tc := range req.GetTopicConfigs() {
		m.opts.Meta.PutTopicConfig(tc.GetTopic(), tc.GetConfigs(), tc.GetTopicId())
	}
	// Resolved once per topic, not per partition: tens of µs each, which
	// a push of thousands of partitions of a few topics repeated for each.
	configs := map[string]*topicResolution{}
	for _, tc := range req.GetTopicConfigs() {
		res := &topicResolution{overrides: tc.GetConfigs()}
		res.tc, res.err = m.topicConfig(res.overrides)
		configs[tc.GetTopic()] = res
	}
	states := req.GetPartitions()
	resp := &controlv1.LeaderAndIsrResponse{Partitions: make([]*controlv1.PartitionResult, len(states))}
	followers := make([]*Replica, len(states))
	// Into the metadata cache all at once, before any is applied: put one
	// by one as the workers reach them, a new topic's partitions appeared
	// a few at a time, and a Kafka client reading Metadata then took a
	// partition count too small (TestMetadataNeverShowsPartOfALeaderAndIsr).
	m.opts.Meta.PutPartitions(states)
	m.endYieldsOfOlderControllers(req.GetControllerEpoch(), states)
	if req.GetFull() {
		m.noteFullPush(states)
	}
	eachPartitionState(states, controlParallelism, func(i int) {
		ps := states[i]
		tp := TP{Topic: ps.GetTopic(), Partition: ps.GetPartition()}
		res := &controlv1.PartitionResult{Topic: tp.Topic, Partition: tp.Partition}
		r, err := m.becomeReplica(tp, ps, configs[tp.Topic])
		if err != nil && kerr.CodeOf(err) == kerr.KafkaStorageError {
			// Its log dir is offline (or may be): an offline replica the
			// session reports, so the controller leaves it out.
			m.mu.Lock()
			m.offline[tp] = err
			m.mu.Unlock()
		}
		if err != nil {
			e := kerr.As(err)
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(e.Code), e.Error()
		} else {
			followers[i] = r
		}
		resp.Partitions[i] = res
	})
	// All at once, and the fetchers' parked round trips are cut short once
	// when the request is applied (fetcherManager.batch).
	m.fetchers.addAll(slices.DeleteFunc(followers, func(r *Replica) bool { return r == nil }))
	m.settleLostLogs(req.GetFull())
	m.logApplied("LeaderAndIsr", req.GetControllerEpoch(), len(states), false, start)
	return resp, nil
}

// logApplied notes a control request applied, at Info when it was large or
// slow (a failover's push: its timing is the failover's), else at Debug.
func (m *Manager) logApplied(kind string, controllerEpoch int32, partitions int, full bool, start time.Time) {
	took := m.now().Sub(start)
	lvl := slog.LevelDebug
	if full || partitions >= 100 || took >= 100*time.Millisecond {
		lvl = slog.LevelInfo
	}
	m.log.Log(context.Background(), lvl, "Applied "+kind, "controller_epoch", controllerEpoch, "partitions", partitions,
		"full", full, "took_ms", took.Milliseconds())
}

// topicResolution is a topic's configs as a LeaderAndIsr carries them and
// the effective config resolved from them (or the error resolving gave).
type topicResolution struct {
	overrides map[string]string
	tc        topicconfig.TopicConfig
	err       error
}

// becomeReplica applies one partition state; it returns the replica when it
// must (re)start fetching as a follower. cfg is the topic's configs from
// the request, nil if it carried none.
func (m *Manager) becomeReplica(tp TP, ps *commonv1.PartitionState, cfg *topicResolution) (*Replica, error) {
	var overrides map[string]string
	if cfg != nil {
		overrides = cfg.overrides
	}
	hosted := false
	for _, id := range ps.GetReplicas() {
		if id == m.opts.BrokerID {
			hosted = true
		}
	}
	if !hosted {
		return nil, kerr.New(kerr.UnknownTopicOrPartition, "broker %d is not a replica of %s-%d", m.opts.BrokerID, tp.Topic, tp.Partition)
	}
	if err := m.refuseEmptyLog(tp, ps); err != nil {
		return nil, err
	}
	r, err := m.getOrCreate(tp, overrides)
	if err != nil {
		return nil, err
	}
	if ps.GetLeader() == m.opts.BrokerID {
		m.forgetRefusal(tp, "its log is created empty to lead it, as an unclean election asked")
	} else {
		m.forgetRefusal(tp, "its log is created; this broker follows it from outside the ISR")
	}
	if r, err = m.checkTopicID(r, overrides); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer func() { r.wake() }() // parked produces and fetches re-check their leader
	defer r.mu.Unlock()
	return m.applyStateLocked(r, ps, cfg)
}

// checkTopicID makes sure the replica's log belongs to the topic the
// controller means (KIP-516). A log without a recorded id adopts the
// topic's. A log recorded under another id is a stray: its topic was
// deleted while this broker was away and a topic of the same name created
// since. Kafka's KRaft brokers set such logs aside too; serving them, or
// following the new leader from them, would mix the old topic's records
// into the new one's. It is deleted and the replica starts empty.
func (m *Manager) checkTopicID(r *Replica, overrides map[string]string) (*Replica, error) {
	want := m.opts.Meta.TopicID(r.tp.Topic)
	if want == "" {
		return r, nil
	}
	switch have := r.log.TopicID(); have {
	case want:
		return r, nil
	case "":
		return r, r.log.SetTopicID(want)
	default:
		m.log.Warn("Deleting a stray log: it belongs to a deleted topic of the same name",
			"topic", r.tp.Topic, "partition", r.tp.Partition, "stray_topic_id", have, "topic_id", want,
			"stray_log_end_offset", r.log.LogEndOffset())
		m.emit(Event{Kind: "truncation", TP: r.tp,
			Reason: fmt.Sprintf("stray log of deleted topic id %s removed; %s now has topic id %s", have, r.tp.Topic, want)})
		if err := m.stopReplica(r.tp, -1, true); err != nil {
			return nil, err
		}
		fresh, err := m.getOrCreate(r.tp, overrides)
		if err != nil {
			return nil, err
		}
		return fresh, fresh.log.SetTopicID(want)
	}
}

// applyStateLocked is becomeReplica's work on a replica whose mu is held;
// the caller wakes its parked requests after unlocking.
func (m *Manager) applyStateLocked(r *Replica, ps *commonv1.PartitionState, cfg *topicResolution) (*Replica, error) {
	tp := r.tp
	now := m.now()
	s := partition.LeaderAndISR{
		Leader: ps.GetLeader(), LeaderEpoch: ps.GetLeaderEpoch(), PartitionEpoch: ps.GetPartitionEpoch(),
		Replicas: ps.GetReplicas(), ISR: ps.GetIsr(), Adding: ps.GetAddingReplicas(),
	}
	if cfg != nil && cfg.overrides != nil {
		m.applyTopicConfigLocked(r, cfg.tc, cfg.err, m.opts.Meta.ConfigVersion(tp.Topic), now)
	}
	if ps.GetLeader() == m.opts.BrokerID {
		// A follower's append after a compaction gap is flushed by its next
		// fetch (logstore.Log.FlushGaps); made leader, it sends none, and its
		// LEO counts toward the HW from here on. Nothing to do but two loads
		// unless it was copying cleaned data.
		if err := r.log.FlushGaps(); err != nil {
			return nil, err
		}
		change, err := r.state.MakeLeader(s, r.log.LogEndOffset(), now)
		if err != nil {
			return nil, err
		}
		if change.Ignored {
			if change.Older {
				return nil, m.refuseOlderState(r, s, change.Reason)
			}
			m.log.Debug("ignoring partition state", "topic", tp.Topic, "partition", tp.Partition, "reason", change.Reason)
			return nil, nil
		}
		if change.RoleChanged {
			r.leaderSince = s.LeaderEpoch
			// An earlier leadership's commits name fetches of records a
			// truncation may since have replaced at the same offsets.
			r.commits, r.nextMark = [len(r.commits)]commitMark{}, 0
		}
		m.fetchers.remove(tp)
		if change.NewLeaderEpoch {
			// KAFKA-7415: record where the new epoch starts before any append.
			if err := r.log.AssignEpochStartOffset(s.LeaderEpoch); err != nil {
				return nil, err
			}
			m.log.Info("became leader", "topic", tp.Topic, "partition", tp.Partition, "leader_epoch", s.LeaderEpoch,
				"isr", partition.FormatIDs(s.ISR), "start_offset", change.EpochStartOffset)
		}
		if change.HW.Advanced() {
			// No follower fetch moved it: the new ISR did (a member the
			// controller dropped, or a leader alone in it).
			m.leaderAndIsrAdvancedLocked(r, s, change.HW)
		}
		return nil, nil
	}
	change, err := r.state.MakeFollower(s, r.log.LogEndOffset(), now)
	if err != nil {
		return nil, err
	}
	if change.Ignored {
		if change.Older {
			return nil, m.refuseOlderState(r, s, change.Reason)
		}
		return nil, nil
	}
	if change.NewLeaderEpoch || change.RoleChanged || r.fetchEpoch != s.LeaderEpoch {
		m.log.Info("became follower", "topic", tp.Topic, "partition", tp.Partition, "leader", s.Leader, "leader_epoch", s.LeaderEpoch)
		r.fetchEpoch = s.LeaderEpoch
		m.fetchers.remove(tp)
		if s.Leader < 0 {
			return nil, nil
		}
		return r, nil
	}
	return nil, nil
}

// refuseOlderState answers a partition state older than the one the
// replica holds. Every state was written to etcd before it was sent, so a
// controller that loaded etcd sends an older one only if etcd's metadata
// went backwards (restored from an older snapshot): its leader epochs and
// ISRs may name replicas that lack acknowledged records. The state is not
// applied (the replica keeps its newer one, as for any stale state) and
// the partition is answered STALE_CONTROLLER_EPOCH, as Kafka's brokers
// answer a LeaderAndIsr whose leader epoch is not newer, so the controller
// says so too.
func (m *Manager) refuseOlderState(r *Replica, s partition.LeaderAndISR, reason string) error {
	snap := r.state.Snapshot(m.now())
	m.metrics.olderStates.Inc()
	m.log.Error("Refusing a partition state older than the one this broker holds: the controller's metadata went backwards (etcd restored from an older snapshot?)",
		"topic", r.tp.Topic, "partition", r.tp.Partition, "reason", reason,
		"leader", s.Leader, "leader_epoch", s.LeaderEpoch, "partition_epoch", s.PartitionEpoch, "isr", partition.FormatIDs(s.ISR),
		"held_leader", snap.Leader, "held_leader_epoch", snap.LeaderEpoch, "held_partition_epoch", snap.PartitionEpoch,
		"held_isr", partition.FormatIDs(snap.ISR))
	return kerr.New(kerr.StaleControllerEpoch, "%s-%d: state older than the one this broker holds (leader epoch %d, partition epoch %d): %s",
		r.tp.Topic, r.tp.Partition, snap.LeaderEpoch, snap.PartitionEpoch, reason)
}

// getOrCreate returns the hosted replica, opening (or creating) its log.
func (m *Manager) getOrCreate(tp TP, overrides map[string]string) (*Replica, error) {
	if r, ok := m.Replica(tp); ok {
		return r, nil
	}
	// Made without the manager's lock: creating a log syncs directories,
	// and every produce, fetch and metadata answer looks replicas up under
	// that lock. Control requests are applied one at a time (ctrlMu), so
	// nothing deletes tp meanwhile; a concurrent creator gets the same log
	// and the first replica inserted wins.
	tc, err := m.topicConfig(overrides)
	if err != nil {
		return nil, err
	}
	lg, err := m.logs.GetOrCreate(tp, m.logConfig(tc))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.replicas[tp]; ok {
		return r, nil
	}
	hw, _ := m.logs.LatestHighWatermark(tp)
	st := partition.New(partition.Config{
		LocalID:           m.opts.BrokerID,
		ReplicaLagTimeMax: time.Duration(m.BrokerConfig().ReplicaLagTimeMaxMs) * time.Millisecond,
		MinInsyncReplicas: int(tc.MinInsyncReplicas),
		Truncation:        m.truncationMode(),
		Brokers:           brokersView{m.opts.Meta},
	}, partition.LogState{LogStartOffset: lg.LogStartOffset(), LogEndOffset: lg.LogEndOffset(), HighWatermark: hw})
	// followerCached and producerExpiration start unknown: a log loaded at
	// startup kept the config it was opened with, so the first config pass
	// sets them.
	r := &Replica{tp: tp, log: lg, state: st, cfg: tc, followerCached: math.MinInt64, producerExpiration: -1, fetchEpoch: -1, leaderSince: -1}
	m.replicas[tp] = r
	return r, nil
}

// topicConfig resolves a topic's effective config: topic overrides, then
// the dynamic broker defaults, then static flags, then built-in defaults.
func (m *Manager) topicConfig(overrides map[string]string) (topicconfig.TopicConfig, error) {
	return topicconfig.Resolve(overrides, m.opts.Meta.BrokerConfigs(), m.opts.Static)
}

func (m *Manager) logConfig(tc topicconfig.TopicConfig) logstore.Config {
	c := logstore.DefaultConfig()
	c.SegmentBytes = int64(tc.SegmentBytes)
	c.SegmentMs = msDuration(tc.SegmentMs)
	c.IndexIntervalBytes = int64(tc.IndexIntervalBytes)
	c.Preallocate = tc.Preallocate
	c.RetentionMs = msDuration(tc.RetentionMs) // -1: no time limit
	c.RetentionBytes = tc.RetentionBytes
	c.MaxMessageBytes = int(tc.MaxMessageBytes)
	c.TimestampBeforeMaxMs = tc.MessageTimestampBeforeMaxMs
	c.TimestampAfterMaxMs = tc.MessageTimestampAfterMaxMs
	if tc.FlushMessages > 0 && tc.FlushMessages < 1<<62 {
		c.FlushMessages = tc.FlushMessages
	}
	if tc.FlushMs >= 0 && tc.FlushMs < 1<<40 {
		// flush.ms=0 flushes whatever is unflushed at every check (1 s), as
		// Kafka's flush scheduler does; the log store reads 0 as never.
		c.FlushInterval = max(time.Duration(tc.FlushMs)*time.Millisecond, time.Nanosecond)
	}
	c.FsyncEveryAppend = m.BrokerConfig().LogFlushFsyncEveryAppend
	c.FollowerCachedBytes = -1 // log.follower.cached.bytes -1 or 0: keep every page
	if v := m.BrokerConfig().LogFollowerCachedBytes; v > 0 {
		c.FollowerCachedBytes = v
	}
	c.ProducerIDExpiration = time.Duration(m.BrokerConfig().ProducerIDExpirationMs) * time.Millisecond
	c.CleanupPolicy = tc.CleanupPolicy
	c.MinCleanableDirtyRatio = tc.MinCleanableDirtyRatio
	c.DeleteRetention = msDuration(tc.DeleteRetentionMs)
	c.MinCompactionLag = msDuration(tc.MinCompactionLagMs)
	if tc.MaxCompactionLagMs > 0 && tc.MaxCompactionLagMs < 1<<40 {
		c.MaxCompactionLag = time.Duration(tc.MaxCompactionLagMs) * time.Millisecond
	}
	return c
}

// applyTopicConfigLocked applies a topic's resolved configs (or the error
// resolving them gave) to a replica: min.insync.replicas to the state
// machine, the rest to the log. ver is what they were resolved from.
func (m *Manager) applyTopicConfigLocked(r *Replica, tc topicconfig.TopicConfig, err error, ver metadata.ConfigVersion, now time.Time) {
	r.cfgVersion = ver
	if err != nil {
		m.log.Warn("ignoring invalid topic config", "topic", r.tp.Topic, "err", err)
		return
	}
	if tc.MinInsyncReplicas != r.cfg.MinInsyncReplicas {
		if upd := r.state.SetMinInsyncReplicas(int(tc.MinInsyncReplicas), now); upd.Advanced() {
			m.minISRLoweredAdvancedLocked(r, int(r.cfg.MinInsyncReplicas), int(tc.MinInsyncReplicas), upd)
			defer r.wakeData() // followers learn the new HW
		}
	}
	if lc := m.logConfig(tc); tc != r.cfg || lc.FollowerCachedBytes != r.followerCached || lc.ProducerIDExpiration != r.producerExpiration {
		if err := r.log.SetConfig(lc); err != nil {
			m.log.Warn("ignoring invalid log config", "topic", r.tp.Topic, "err", err)
		}
		r.followerCached = lc.FollowerCachedBytes
		r.producerExpiration = lc.ProducerIDExpiration
	}
	r.cfg = tc
}

// UpdateMetadata refreshes the metadata cache and applies config changes.
func (m *Manager) UpdateMetadata(req *controlv1.UpdateMetadataRequest) error {
	if err := m.checkControlRequest(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return err
	}
	m.noteAdmitted("UpdateMetadata")
	unlock, err := m.lockControl(req.GetControllerEpoch(), req.GetBrokerEpoch())
	if err != nil {
		return err
	}
	defer unlock()
	m.forgetAppliedLeaderAndIsr()
	defer m.fetchers.batch()()
	start := m.now()
	defer func() {
		m.logApplied("UpdateMetadata", req.GetControllerEpoch(), len(req.GetPartitions()), req.GetFull(), start)
	}()
	// The epoch is checked again with the cache's lock held for the
	// update: a newer controller's request admitted since lockControl
	// (waiting for ctrlMu) makes this view an older one.
	if err := m.opts.Meta.ApplyUpdateOfNewest(req); err != nil {
		m.log.Warn("refusing an UpdateMetadata overtaken by a newer controller's request", "err", err)
		return err
	}
	epoch := req.GetControllerEpoch()
	if req.GetFull() {
		m.noteFullView(req.GetPartitions())
		m.deleteStrays(epoch, req.GetPartitions())
	}
	for _, t := range req.GetDeletedTopics() {
		if !m.stillNewestController(epoch, "deleting the replicas of a deleted topic") {
			break
		}
		for _, r := range m.Replicas() {
			if r.tp.Topic == t {
				_ = m.stopReplica(r.tp, -1, true)
			}
		}
	}
	// Every UpdateMetadata carries the whole dynamic broker config; an
	// empty one (the last key deleted) arrives as nil and must apply too.
	if bc, err := topicconfig.ResolveBroker(req.GetBrokerConfigs(), m.opts.Static); err != nil {
		m.log.Warn("ignoring invalid dynamic broker configs", "err", err)
	} else {
		m.broker.Store(&bc)
	}
	m.applyChangedConfigs()
	if req.GetFull() || len(req.GetBrokers()) > 0 {
		m.wakeDeleteRecords() // a broker gone no longer holds a low watermark
	}
	return nil
}

// resolvedTopic is one topic's effective config for one UpdateMetadata.
type resolvedTopic struct {
	tc  topicconfig.TopicConfig
	err error
	ver metadata.ConfigVersion
}

// applyChangedConfigs re-resolves the effective config of the replicas
// whose topic or dynamic broker configs changed since they were resolved,
// once per topic: an UpdateMetadata that changes no config costs a version
// check per replica, not a resolution (~27 µs) each.
func (m *Manager) applyChangedConfigs() {
	now := m.now()
	resolved := map[string]resolvedTopic{}
	for _, r := range m.Replicas() {
		ver := m.opts.Meta.ConfigVersion(r.tp.Topic)
		r.mu.Lock()
		current := r.cfgVersion == ver
		r.mu.Unlock()
		if current {
			continue
		}
		rt, ok := resolved[r.tp.Topic]
		if !ok {
			var overrides map[string]string
			overrides, rt.ver = m.opts.Meta.TopicConfigVersioned(r.tp.Topic)
			rt.tc, rt.err = m.topicConfig(overrides)
			resolved[r.tp.Topic] = rt
			m.metrics.configResolutions.Inc()
		}
		r.mu.Lock()
		m.applyTopicConfigLocked(r, rt.tc, rt.err, rt.ver, now)
		r.mu.Unlock()
	}
}

// deleteStrays deletes the replicas and logs on disk that a full
// UpdateMetadata shows to be strays: left by a topic deleted (and perhaps
// created again), or a replica moved away, while this broker was gone,
// whose StopReplica never came. The full view lists every partition of
// every topic with a state, and a broker gets the controller's requests in
// order, so a partition it leaves out is not one a LeaderAndIsr already
// made here.
//
// It runs under ctrlMu, so no other control request is applied during
// it: a newer controller's LeaderAndIsr, which may make here a replica
// this older view does not list (a topic created since), is applied only
// after it. One admitted meanwhile (it then waits for ctrlMu) still ends
// the sweep: the view is an older one.
func (m *Manager) deleteStrays(controllerEpoch int32, parts []*commonv1.PartitionState) {
	live := map[string]bool{}
	assigned := map[TP][]int32{}
	for _, p := range parts {
		live[p.GetTopic()] = true
		assigned[TP{Topic: p.GetTopic(), Partition: p.GetPartition()}] = p.GetReplicas()
	}
	for _, tp := range m.localPartitions() {
		why, attrs := m.strayReason(tp, live, assigned)
		if why == "" {
			continue
		}
		if !m.stillNewestController(controllerEpoch, "deleting stray replicas") {
			return
		}
		if m.deletingStray != nil {
			m.deletingStray(tp)
		}
		m.log.Info("deleting stray replica: "+why, append([]any{"topic", tp.Topic, "partition", tp.Partition}, attrs...)...)
		if err := m.stopReplica(tp, -1, true); err != nil {
			m.log.Warn("deleting replica failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
	}
}

// stillNewestController reports whether controllerEpoch is still the newest
// seen, logging that the step named is given up when it is not.
func (m *Manager) stillNewestController(controllerEpoch int32, step string) bool {
	err := m.succeededController(controllerEpoch)
	if err != nil {
		m.log.Warn("Giving up "+step+": a newer controller's request was admitted", "err", err)
	}
	return err == nil
}

// strayReason says why tp's replica or log is a stray, with what shows it,
// given the topics a full view lists and its assignment; "" when it is not
// one.
func (m *Manager) strayReason(tp TP, live map[string]bool, assigned map[TP][]int32) (string, []any) {
	if !live[tp.Topic] {
		return "its topic no longer exists", nil
	}
	// A topic id is never used again: a log recording another is of a
	// deleted topic of the same name, whatever the view says of tp.
	have, want := m.logTopicID(tp), m.opts.Meta.TopicID(tp.Topic)
	if have != "" && want != "" && have != want {
		return "its log belongs to a deleted topic of the same name", []any{"stray_topic_id", have, "topic_id", want}
	}
	reps, listed := assigned[tp]
	switch {
	case !listed && have != "" && have == want:
		// The topic's own log: it was never deleted and its partitions
		// only grow, so the view is older than the log. Kept: deleting it
		// could lose a live replica's records.
		m.log.Warn("keeping a log of a partition the full metadata does not list: it records the topic's own id",
			"topic", tp.Topic, "partition", tp.Partition, "topic_id", have)
		return "", nil
	case !listed:
		// The topic was created again with fewer partitions (the ids
		// differ when both are known; nothing says this log is the new
		// topic's).
		return "its topic has no such partition", []any{"stray_topic_id", have, "topic_id", want}
	case len(reps) > 0 && !slices.Contains(reps, m.opts.BrokerID):
		// Reassigned away while this broker was gone.
		return "this broker is no longer assigned", []any{"replicas", partition.FormatIDs(reps)}
	}
	return "", nil
}

// logTopicID is the topic id tp's log records: the served replica's, or
// the log's on disk; "" when none is recorded or known.
func (m *Manager) logTopicID(tp TP) string {
	if r, ok := m.Replica(tp); ok {
		return r.log.TopicID()
	}
	if s, ok := m.logs.(interface{ TopicID(TP) string }); ok {
		return s.TopicID(tp)
	}
	return ""
}

// localPartitions lists the hosted replicas and the logs on disk that no
// LeaderAndIsr has claimed yet (opened at startup), once each.
func (m *Manager) localPartitions() []TP {
	seen := map[TP]bool{}
	var out []TP
	for _, r := range m.Replicas() {
		seen[r.tp] = true
		out = append(out, r.tp)
	}
	if lister, ok := m.logs.(interface{ Partitions() []TP }); ok {
		for _, tp := range lister.Partitions() {
			if !seen[tp] {
				out = append(out, tp)
			}
		}
	}
	return out
}

// StopReplica stops replicas, deleting their logs for topic deletion.
func (m *Manager) StopReplica(req *controlv1.StopReplicaRequest) (*controlv1.StopReplicaResponse, error) {
	if err := m.checkControlRequest(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	m.noteAdmitted("StopReplica")
	// Applied after a newer controller's LeaderAndIsr, it would stop (or
	// delete) a replica that request made or kept here.
	unlock, err := m.lockControl(req.GetControllerEpoch(), req.GetBrokerEpoch())
	if err != nil {
		return nil, err
	}
	defer unlock()
	m.forgetAppliedLeaderAndIsr()
	defer m.fetchers.batch()()
	resp := &controlv1.StopReplicaResponse{}
	for _, p := range req.GetPartitions() {
		tp := TP{Topic: p.GetTopic(), Partition: p.GetPartition()}
		res := &controlv1.PartitionResult{Topic: tp.Topic, Partition: tp.Partition}
		if err := m.stopReplica(tp, p.GetLeaderEpoch(), p.GetDelete()); err != nil {
			e := kerr.As(err)
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(e.Code), e.Error()
		} else if p.GetDelete() {
			m.forgetDeleted(tp)
		}
		resp.Partitions = append(resp.Partitions, res)
	}
	m.settleLostLogs(false)
	return resp, nil
}

func (m *Manager) stopReplica(tp TP, leaderEpoch int32, del bool) error {
	r, ok := m.Replica(tp)
	if !ok {
		if del {
			return m.logs.Delete(tp)
		}
		return nil
	}
	r.mu.Lock()
	cur := r.state.LeaderEpoch()
	r.mu.Unlock()
	if leaderEpoch >= 0 && leaderEpoch < cur {
		return kerr.New(kerr.FencedLeaderEpoch, "StopReplica for leader epoch %d, replica is at %d", leaderEpoch, cur)
	}
	m.fetchers.remove(tp)
	m.mu.Lock()
	delete(m.replicas, tp)
	m.mu.Unlock()
	if !del {
		// The log stays, and the checkpoints no longer find this replica:
		// they keep its HW, which a replica made again starts from (Kafka
		// keeps the partition itself).
		r.mu.Lock()
		hw := r.state.HighWatermark()
		r.mu.Unlock()
		m.logs.KeepHighWatermark(tp, hw)
	}
	// Parked requests see the replica gone: the manager answers them
	// NOT_LEADER_OR_FOLLOWER when they re-check.
	r.mu.Lock()
	_, _ = r.state.MakeFollower(partition.LeaderAndISR{Leader: -1, LeaderEpoch: cur + 1, PartitionEpoch: r.state.PartitionEpoch() + 1,
		Replicas: r.state.Replicas(), ISR: r.state.ISR()}, r.log.LogEndOffset(), m.now())
	r.mu.Unlock()
	r.wake()
	if del {
		if err := m.logs.Delete(tp); err != nil {
			return fmt.Errorf("delete %s-%d: %w", tp.Topic, tp.Partition, err)
		}
		m.log.Info("deleted replica", "topic", tp.Topic, "partition", tp.Partition)
	}
	m.forgetTopicMetrics(tp.Topic)
	return nil
}

// tpKey renders a partition for logs.
func tpKey(tp TP) string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// msDuration converts milliseconds, saturating where a Duration would
// overflow (Long.MAX_VALUE-style "forever" settings).
func msDuration(ms int64) time.Duration {
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

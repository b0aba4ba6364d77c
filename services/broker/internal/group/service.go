package group

import (
	"context"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	"google.golang.org/grpc/peer"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
	"tidemark.io/services/recordbatch"
)

// Service serves tidemark.group.v1.GroupService from a Coordinator.
type Service struct {
	groupv1.UnimplementedGroupServiceServer
	C *Coordinator
}

var _ groupv1.GroupServiceServer = (*Service)(nil)

func code(err *kerr.Error) commonv1.ErrorCode {
	if err == nil {
		return commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	return commonv1.ErrorCode(err.Code)
}

// FindCoordinator names the leader of the group's offsets partition,
// having the controller create __consumer_offsets on first use.
func (s *Service) FindCoordinator(ctx context.Context, req *groupv1.FindCoordinatorRequest) (*groupv1.FindCoordinatorResponse, error) {
	if req.GetKey() == "" {
		return nil, kerr.BadField(kerr.InvalidGroupID, "key", "must not be empty")
	}
	if len(req.GetKey()) > maxStoredString {
		return nil, kerr.BadField(kerr.InvalidGroupID, "key", "%d bytes; at most %d", len(req.GetKey()), maxStoredString)
	}
	// Groups are the only coordinators tidemark has; Kafka answers an
	// unknown type INVALID_REQUEST too.
	if kt := req.GetKeyType(); kt != groupv1.CoordinatorType_COORDINATOR_TYPE_UNSPECIFIED && kt != groupv1.CoordinatorType_COORDINATOR_TYPE_GROUP {
		return nil, kerr.BadField(kerr.InvalidRequest, "key_type", "must be COORDINATOR_TYPE_GROUP, got %d", kt)
	}
	c := s.C
	n := c.host.PartitionCount(OffsetsTopic)
	if n == 0 {
		// Concurrent first calls all ask: the controller creates the topic
		// once and answers the others with what exists.
		err := c.host.CreateOffsetsTopic(ctx)
		if err != nil {
			e := kerr.As(err)
			if e.Code == kerr.NotController || e.Code.Retriable() {
				return nil, kerr.New(kerr.CoordinatorNotAvailable, "creating %s: %v", OffsetsTopic, err)
			}
			return nil, err
		}
		// The controller answered once the leaders accepted their roles;
		// the metadata reaches this broker on its own path.
		deadline := time.Now().Add(5 * time.Second)
		for n = c.host.PartitionCount(OffsetsTopic); n == 0 && time.Now().Before(deadline); n = c.host.PartitionCount(OffsetsTopic) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		if n == 0 {
			return nil, kerr.New(kerr.CoordinatorNotAvailable, "%s was created but this broker has no metadata for it yet", OffsetsTopic)
		}
	}
	p := PartitionFor(req.GetKey(), n)
	leader, ok := c.host.PartitionLeader(TP{OffsetsTopic, p})
	if !ok {
		return nil, kerr.New(kerr.CoordinatorNotAvailable, "%s-%d has no leader", OffsetsTopic, p)
	}
	return &groupv1.FindCoordinatorResponse{Coordinator: &commonv1.Node{Id: leader.ID, Address: leader.Address}, Partition: p}, nil
}

func clientHost(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if h, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			return "/" + h
		}
		return "/" + p.Addr.String()
	}
	return ""
}

// JoinGroup joins the group and waits for the join phase to end.
func (s *Service) JoinGroup(ctx context.Context, req *groupv1.JoinGroupRequest) (*groupv1.JoinGroupResponse, error) {
	if err := checkJoinStrings(req); err != nil {
		return nil, err
	}
	c := s.C
	lim := c.limits()
	jr := JoinRequest{MemberID: req.GetMemberId(), InstanceID: req.GetGroupInstanceId(), ClientID: req.GetClientId(), ClientHost: clientHost(ctx),
		SessionTimeout: time.Duration(req.GetSessionTimeoutMs()) * time.Millisecond, RebalanceTimeout: time.Duration(req.GetRebalanceTimeoutMs()) * time.Millisecond,
		ProtocolType: req.GetProtocolType(), NewMemberID: newMemberID(req.GetClientId())}
	for _, p := range req.GetProtocols() {
		jr.Protocols = append(jr.Protocols, Protocol{Name: p.GetName(), Metadata: p.GetMetadata()})
	}
	sh, err := c.lockShard(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	g := sh.groups[req.GetGroupId()]
	if g == nil {
		if req.GetMemberId() != "" && req.GetGroupInstanceId() == "" {
			c.mu.Unlock()
			return nil, kerr.New(kerr.UnknownMemberID, "group %q does not exist", req.GetGroupId())
		}
		g = NewGroup(req.GetGroupId(), c.now())
	}
	res, parked, eff := g.Join(c.now(), lim, jr)
	if g.Size() > 0 || g.HasPending() || sh.groups[g.ID] != nil {
		sh.groups[g.ID] = g
	}
	var ch chan JoinResult
	if res == nil {
		ch = make(chan JoinResult, 1)
		if old, ok := sh.joins[waitKey(g.ID, parked)]; ok {
			old <- JoinResult{Err: kerr.New(kerr.UnknownMemberID, "a newer JoinGroup of member %q replaced this one", parked)}
		}
		sh.joins[waitKey(g.ID, parked)] = ch
	}
	c.finishLocked(sh, g, eff)
	if res == nil {
		select {
		case r := <-ch:
			res = &r
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if res.Err != nil {
		return nil, res.Err
	}
	out := &groupv1.JoinGroupResponse{GenerationId: res.Generation, ProtocolType: res.ProtocolType, ProtocolName: res.Protocol,
		Leader: res.Leader, SkipAssignment: res.SkipAssignment, MemberId: res.MemberID}
	for _, m := range res.Members {
		out.Members = append(out.Members, &groupv1.JoinGroupMember{MemberId: m.MemberID, GroupInstanceId: m.InstanceID, Metadata: m.Metadata})
	}
	return out, nil
}

// checkJoinStrings refuses the strings of a join the group's metadata
// record could not hold (maxStoredString; a member id is the client id and
// 33 bytes more).
func checkJoinStrings(req *groupv1.JoinGroupRequest) error {
	check := func(field, value string, limit int) error {
		if len(value) > limit {
			return kerr.BadField(kerr.InvalidRequest, field, "%d bytes; at most %d", len(value), limit)
		}
		return nil
	}
	for _, err := range []error{
		check("member_id", req.GetMemberId(), maxStoredString),
		check("group_instance_id", req.GetGroupInstanceId(), maxStoredString),
		check("client_id", req.GetClientId(), maxStoredString-33), // "-" and 32 hex digits follow it
		check("protocol_type", req.GetProtocolType(), maxStoredString),
	} {
		if err != nil {
			return err
		}
	}
	for i, p := range req.GetProtocols() {
		if err := check("protocols["+strconv.Itoa(i)+"].name", p.GetName(), maxStoredString); err != nil {
			return err
		}
	}
	return nil
}

// finishLocked ends a step on g: it answers the parked requests the step
// released, unlocks, and writes the group's metadata when it changed.
func (c *Coordinator) finishLocked(sh *shard, g *Group, eff Effects) {
	c.deliverLocked(sh, g.ID, eff)
	if eff.Persist {
		c.writeLocked(sh, groupBatch(g, c.now()))
	}
	c.mu.Unlock()
}

// SyncGroup hands out the leader's assignment.
func (s *Service) SyncGroup(ctx context.Context, req *groupv1.SyncGroupRequest) (*groupv1.SyncGroupResponse, error) {
	c := s.C
	sh, err := c.lockShard(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	g := sh.groups[req.GetGroupId()]
	if g == nil {
		c.mu.Unlock()
		return nil, kerr.New(kerr.UnknownMemberID, "group %q does not exist", req.GetGroupId())
	}
	assign := map[string][]byte{}
	for _, a := range req.GetAssignments() {
		assign[a.GetMemberId()] = a.GetAssignment()
	}
	res, eff := g.Sync(c.now(), req.GetMemberId(), req.GetGroupInstanceId(), req.GetGenerationId(), req.GetProtocolType(), req.GetProtocolName(), assign)
	var ch chan SyncResult
	if res == nil {
		ch = make(chan SyncResult, 1)
		if old, ok := sh.syncs[waitKey(g.ID, req.GetMemberId())]; ok {
			old <- SyncResult{Err: kerr.New(kerr.UnknownMemberID, "a newer SyncGroup of member %q replaced this one", req.GetMemberId())}
		}
		sh.syncs[waitKey(g.ID, req.GetMemberId())] = ch
	}
	c.finishLocked(sh, g, eff)
	if res == nil {
		select {
		case r := <-ch:
			res = &r
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return &groupv1.SyncGroupResponse{ProtocolType: res.ProtocolType, ProtocolName: res.Protocol, Assignment: res.Assignment}, nil
}

// Heartbeat keeps a member alive.
func (s *Service) Heartbeat(ctx context.Context, req *groupv1.HeartbeatRequest) (*groupv1.HeartbeatResponse, error) {
	c := s.C
	sh, err := c.lockShard(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	g := sh.groups[req.GetGroupId()]
	if g == nil {
		return nil, kerr.New(kerr.UnknownMemberID, "group %q does not exist", req.GetGroupId())
	}
	if e := g.Heartbeat(c.now(), req.GetMemberId(), req.GetGroupInstanceId(), req.GetGenerationId()); e != nil {
		return nil, e
	}
	return &groupv1.HeartbeatResponse{}, nil
}

// LeaveGroup removes members.
func (s *Service) LeaveGroup(ctx context.Context, req *groupv1.LeaveGroupRequest) (*groupv1.LeaveGroupResponse, error) {
	if len(req.GetMembers()) == 0 {
		return nil, kerr.BadField(kerr.InvalidRequest, "members", "name at least one member")
	}
	c := s.C
	sh, err := c.lockShard(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	g := sh.groups[req.GetGroupId()]
	if g == nil {
		c.mu.Unlock()
		return nil, kerr.New(kerr.UnknownMemberID, "group %q does not exist", req.GetGroupId())
	}
	who := make([]MemberIdentity, len(req.GetMembers()))
	for i, m := range req.GetMembers() {
		who[i] = MemberIdentity{MemberID: m.GetMemberId(), InstanceID: m.GetGroupInstanceId()}
	}
	errs, eff := g.Leave(c.now(), who)
	c.finishLocked(sh, g, eff)
	out := &groupv1.LeaveGroupResponse{}
	for i, m := range req.GetMembers() {
		out.Members = append(out.Members, &groupv1.LeaveGroupMemberResult{MemberId: m.GetMemberId(), GroupInstanceId: m.GetGroupInstanceId(), ErrorCode: code(errs[i])})
	}
	return out, nil
}

// commitEntry is one partition's offset to write.
type commitEntry struct {
	tp      TP
	v       OffsetValue
	topicID string // its topic's id in the metadata as the commit came
}

// OffsetCommit writes committed offsets with acks=all and answers once
// they are acknowledged.
func (s *Service) OffsetCommit(ctx context.Context, req *groupv1.OffsetCommitRequest) (*groupv1.OffsetCommitResponse, error) {
	c := s.C
	// The record's metadata string holds at most maxStoredString bytes,
	// whatever offset.metadata.max.bytes allows.
	maxMeta := min(int(c.host.Config().OffsetMetadataMaxBytes), maxStoredString)
	out := &groupv1.OffsetCommitResponse{}
	var entries []commitEntry
	now := c.now()
	expire := expireTimestamp(req.RetentionTimeMs, now)
	for i, t := range req.GetTopics() {
		if t.GetName() == "" {
			return nil, kerr.BadField(kerr.InvalidTopicException, "topics["+strconv.Itoa(i)+"].name", "must not be empty")
		}
		tr := &groupv1.OffsetCommitTopicResult{Name: t.GetName()}
		out.Topics = append(out.Topics, tr)
		for _, p := range t.GetPartitions() {
			pr := &groupv1.OffsetCommitPartitionResult{Partition: p.GetPartition()}
			tr.Partitions = append(tr.Partitions, pr)
			switch {
			case p.GetPartition() < 0:
				pr.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			case len(p.GetMetadata()) > maxMeta:
				pr.ErrorCode = commonv1.ErrorCode_ERROR_CODE_OFFSET_METADATA_TOO_LARGE
			case !c.knownPartition(t.GetName(), p.GetPartition()):
				pr.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			default:
				id, _ := c.host.TopicID(t.GetName())
				entries = append(entries, commitEntry{tp: TP{t.GetName(), p.GetPartition()},
					v:       OffsetValue{Offset: p.GetCommittedOffset(), LeaderEpoch: p.GetCommittedLeaderEpoch(), Metadata: p.GetMetadata(), CommitTimestamp: now.UnixMilli(), ExpireTimestamp: expire},
					topicID: id})
			}
		}
	}
	if err := c.commit(ctx, req.GetGroupId(), req.GetMemberId(), req.GetGroupInstanceId(), req.GetGenerationId(), entries); err != nil {
		return nil, err
	}
	return out, nil
}

// expireTimestamp is when a commit made at now with the retention asked
// for expires, as Kafka's OffsetCommit v2-v4 sets it: commit time plus
// retention, unless the retention is unset or -1 (0: none, the broker's
// offsets.retention.minutes applies). A time at or before the epoch is
// kept at 1 ms after it, already past: 0 and -1 mean none.
func expireTimestamp(retentionMs *int64, now time.Time) int64 {
	if retentionMs == nil || *retentionMs == -1 {
		return 0
	}
	at := now.UnixMilli()
	if *retentionMs > math.MaxInt64-at {
		// now + retention would wrap to the past and expire the offset at
		// once; a retention that long keeps it for good.
		return math.MaxInt64
	}
	return max(at+*retentionMs, 1)
}

// knownPartition reports whether the metadata holds tp, as Kafka checks
// its metadata cache before storing an offset: an offset for a topic that
// does not exist would otherwise be handed to the consumers of a topic
// created later under its name. A broker with no metadata yet refuses
// nothing it cannot judge.
func (c *Coordinator) knownPartition(topic string, partition int32) bool {
	if _, ok := c.host.TopicID(topic); !ok {
		return true
	}
	return partition < c.host.PartitionCount(topic)
}

// commit fences the committer, writes the offsets in one acks=all batch
// through the produce path and applies them once acknowledged.
func (c *Coordinator) commit(ctx context.Context, group, member, instance string, generation int32, entries []commitEntry) error {
	sh, err := c.lockShard(group)
	if err != nil {
		return err
	}
	g := sh.groups[group]
	created := g == nil
	if created {
		g = NewGroup(group, c.now())
	}
	if e := g.CheckCommit(c.now(), member, instance, generation); e != nil {
		c.mu.Unlock()
		return e
	}
	if len(entries) == 0 {
		c.mu.Unlock()
		return nil
	}
	if created {
		sh.groups[group] = g
	}
	if sh.inflight[group] == nil {
		sh.inflight[group] = map[TP]int{}
	}
	var b recordbatch.Builder
	tps := make([]TP, len(entries))
	for i, e := range entries {
		sh.inflight[group][e.tp]++
		tps[i] = e.tp
		appendOffset(&b, group, e.tp, e.v, e.topicID)
	}
	batch := clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
	// A tombstone of one of these offsets still queued (expired, deleted)
	// must land first, or it would take this commit away at the next load.
	tombstone := sh.tombstoneOf(group, tps)
	c.mu.Unlock()

	var last int64
	var werr error
	if tombstone != nil {
		select {
		case <-tombstone:
		case <-ctx.Done():
			werr = ctx.Err()
		}
	}
	if werr == nil {
		last, werr = c.host.Append(ctx, TP{OffsetsTopic, sh.partition}, sh.epoch, batch)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		if sh.inflight[group][e.tp]--; sh.inflight[group][e.tp] <= 0 {
			delete(sh.inflight[group], e.tp)
		}
	}
	if werr != nil {
		return commitError(werr)
	}
	if c.shards[sh.partition] != sh {
		// Written and acknowledged, but the shard moved on: the new
		// coordinator loads it from the log.
		return nil
	}
	if sh.offsets[group] == nil {
		sh.offsets[group] = map[TP]committed{}
	}
	first := last - int64(len(entries)) + 1
	for i, e := range entries {
		at := first + int64(i)
		if cur, ok := sh.offsets[group][e.tp]; !ok || cur.logOffset < at {
			sh.offsets[group][e.tp] = c.applyLocked(committed{OffsetValue: e.v, logOffset: at, topicID: e.topicID})
		}
	}
	return nil
}

// commitError maps a failed write of __consumer_offsets to what a committer
// understands, as Kafka does: the coordinator moved, or is not available.
func commitError(err error) error {
	e := kerr.As(err)
	switch e.Code {
	case kerr.NotLeaderOrFollower, kerr.FencedLeaderEpoch, kerr.KafkaStorageError, kerr.NotCoordinator:
		return kerr.New(kerr.NotCoordinator, "the coordinator lost its offsets partition: %s", e.Message)
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut, kerr.LeaderNotAvailable:
		return kerr.New(kerr.CoordinatorNotAvailable, "the commit was not acknowledged by the offsets partition's replicas: %s", e.Error())
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.New(kerr.InvalidCommitOffsetSize, "%s", e.Message)
	}
	if err == context.Canceled || err == context.DeadlineExceeded {
		return err
	}
	return kerr.New(kerr.UnknownServerError, "writing the commit: %v", err)
}

// OffsetFetch returns committed offsets.
func (s *Service) OffsetFetch(ctx context.Context, req *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	c := s.C
	// A stable offset is one whose record the offsets partition has
	// committed (below its high watermark).
	stableBelow := int64(math.MaxInt64)
	if req.GetRequireStable() {
		if n := c.host.PartitionCount(OffsetsTopic); n > 0 {
			if po, ok := c.host.LocalOffsets(TP{OffsetsTopic, PartitionFor(req.GetGroupId(), n)}); ok {
				stableBelow = po.HighWatermark
			}
		}
	}
	sh, err := c.lockShard(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	offs := sh.offsets[req.GetGroupId()]
	inflight := sh.inflight[req.GetGroupId()]
	out := &groupv1.OffsetFetchResponse{}
	row := func(tp TP) *groupv1.OffsetFetchPartition {
		p := &groupv1.OffsetFetchPartition{Partition: tp.Partition, CommittedOffset: -1, CommittedLeaderEpoch: -1}
		o, has := offs[tp]
		if req.GetRequireStable() && (inflight[tp] > 0 || (has && o.logOffset >= stableBelow)) {
			p.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNSTABLE_OFFSET_COMMIT
			return p
		}
		if has {
			p.CommittedOffset, p.CommittedLeaderEpoch, p.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
		}
		return p
	}
	if len(req.GetTopics()) == 0 {
		byTopic := map[string]*groupv1.OffsetFetchTopicResult{}
		for _, tp := range sortedTPs(offs) {
			t := byTopic[tp.Topic]
			if t == nil {
				t = &groupv1.OffsetFetchTopicResult{Name: tp.Topic}
				byTopic[tp.Topic] = t
				out.Topics = append(out.Topics, t)
			}
			t.Partitions = append(t.Partitions, row(tp))
		}
		return out, nil
	}
	for _, t := range req.GetTopics() {
		tr := &groupv1.OffsetFetchTopicResult{Name: t.GetName()}
		parts := t.GetPartitions()
		if len(parts) == 0 {
			for _, tp := range sortedTPs(offs) {
				if tp.Topic == t.GetName() {
					parts = append(parts, tp.Partition)
				}
			}
		}
		for _, p := range parts {
			tr.Partitions = append(tr.Partitions, row(TP{t.GetName(), p}))
		}
		out.Topics = append(out.Topics, tr)
	}
	return out, nil
}

func sortedTPs[V any](m map[TP]V) []TP {
	out := make([]TP, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

// sortTPs orders partitions by topic, then partition number.
func sortTPs(tps []TP) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// ListGroups lists the groups of every loaded offsets partition, in group
// id order, a page at a time when the request asks for one.
func (s *Service) ListGroups(ctx context.Context, req *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	pg, err := paging.Parse(req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	c := s.C
	var states []State
	for _, f := range req.GetStatesFilter() {
		st, ok := ParseState(f)
		if !ok {
			return nil, kerr.BadField(kerr.InvalidRequest, "states_filter", "unknown state %q (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead)", f)
		}
		states = append(states, st)
	}
	groups, err := c.listGroups(states, req.GetTypesFilter())
	if err != nil {
		return nil, err
	}
	// The page is cut with c.mu released: the caller's view of it asks
	// the authorizer.
	cur := paging.NewCursor(ctx, pg)
	out := &groupv1.ListGroupsResponse{}
	for _, g := range groups {
		if cur.Skip(g.GroupId) {
			continue
		}
		if !cur.Take(g.GroupId) {
			break
		}
		out.Groups = append(out.Groups, g)
	}
	out.NextPageToken = cur.Next()
	return out, nil
}

// listGroups is every group of the loaded offsets partitions in the given
// states and of the given protocol types (none: any), in id order.
func (c *Coordinator) listGroups(states []State, types []string) ([]*groupv1.ListedGroup, error) {
	id := c.host.BrokerID()
	var out []*groupv1.ListedGroup
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	add := func(gid, ptype string, st State) {
		if seen[gid] {
			return
		}
		seen[gid] = true
		if len(states) > 0 && !slices.Contains(states, st) {
			return
		}
		if len(types) > 0 && !slices.Contains(types, ptype) {
			return
		}
		out = append(out, &groupv1.ListedGroup{GroupId: gid, ProtocolType: ptype, GroupState: st.String(), CoordinatorId: id})
	}
	for _, sh := range c.shards {
		if sh.loading {
			return nil, kerr.New(kerr.CoordinatorLoadInProgress, "broker %d is loading the groups of %s-%d", id, OffsetsTopic, sh.partition)
		}
		for gid, g := range sh.groups {
			if g.State != Dead {
				add(gid, g.ProtocolType, g.State)
			}
		}
		for gid := range sh.offsets {
			add(gid, "", Empty)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupId < out[j].GroupId })
	return out, nil
}

// DescribeGroups describes groups this broker coordinates.
func (s *Service) DescribeGroups(ctx context.Context, req *groupv1.DescribeGroupsRequest) (*groupv1.DescribeGroupsResponse, error) {
	if err := checkGroupIDs(req.GetGroupIds()); err != nil {
		return nil, err
	}
	c := s.C
	out := &groupv1.DescribeGroupsResponse{}
	me := c.host.Self()
	self := &commonv1.Node{Id: me.ID, Address: me.Address}
	for _, gid := range req.GetGroupIds() {
		d := &groupv1.DescribedGroup{GroupId: gid}
		out.Groups = append(out.Groups, d)
		sh, err := c.lockShard(gid)
		if err != nil {
			d.ErrorCode = code(kerr.As(err))
			continue
		}
		d.Coordinator = self
		g := sh.groups[gid]
		if g == nil || g.State == Dead {
			d.GroupState = Dead.String()
			if _, ok := sh.offsets[gid]; ok {
				d.GroupState = Empty.String()
			}
			c.mu.Unlock()
			continue
		}
		d.GroupState, d.ProtocolType, d.ProtocolName, d.GenerationId, d.Leader = g.State.String(), g.ProtocolType, g.Protocol, g.Generation, g.Leader
		for _, m := range g.Members() {
			md, _ := m.metadataFor(g.Protocol)
			d.Members = append(d.Members, &groupv1.DescribedGroupMember{MemberId: m.ID, GroupInstanceId: m.InstanceID, ClientId: m.ClientID,
				ClientHost: m.ClientHost, MemberMetadata: md, MemberAssignment: m.Assignment})
		}
		c.mu.Unlock()
	}
	return out, nil
}

// checkGroupIDs refuses a list naming a group id no record could hold
// (maxStoredString). Each id is repeated in the answer: a 5 MB one made an
// answer beyond a client's 4 MB receive limit, which the caller saw as an
// unreadable error rather than the group's INVALID_GROUP_ID.
func checkGroupIDs(ids []string) error {
	for i, id := range ids {
		if len(id) > maxStoredString {
			return kerr.BadField(kerr.InvalidRequest, "group_ids["+strconv.Itoa(i)+"]", "%d bytes; at most %d", len(id), maxStoredString)
		}
	}
	return nil
}

// DeleteGroups deletes groups without members: tombstones for the group
// and each of its offsets, written with acks=all.
func (s *Service) DeleteGroups(ctx context.Context, req *groupv1.DeleteGroupsRequest) (*groupv1.DeleteGroupsResponse, error) {
	if err := checkGroupIDs(req.GetGroupIds()); err != nil {
		return nil, err
	}
	c := s.C
	out := &groupv1.DeleteGroupsResponse{}
	for _, gid := range req.GetGroupIds() {
		r := &groupv1.DeletableGroupResult{GroupId: gid}
		out.Results = append(out.Results, r)
		if err := c.deleteGroup(ctx, gid); err != nil {
			r.ErrorCode = code(kerr.As(err))
		}
	}
	return out, nil
}

// deleteGroup deletes an Empty group and its offsets. As in Kafka, the
// group is Dead and its offsets are gone from the moment its tombstones
// are queued (a commit to it is refused COORDINATOR_NOT_AVAILABLE, a
// delete retried meanwhile too); the tombstones' write, not the caller's
// wait, settles it (settleDeleteLocked). A caller that stops waiting
// first is answered COORDINATOR_NOT_AVAILABLE (Kafka's answer to a timed
// out write) and the delete goes on: its retry finds the group gone
// (GROUP_ID_NOT_FOUND), or finds it back if the write failed.
func (c *Coordinator) deleteGroup(ctx context.Context, gid string) error {
	sh, err := c.lockShard(gid)
	if err != nil {
		return err
	}
	if err := checkDeletable(sh, gid); err != nil {
		c.mu.Unlock()
		return err
	}
	done := c.startDeleteLocked(sh, gid)
	c.mu.Unlock()
	select {
	case werr := <-done:
		if werr != nil {
			return commitError(werr)
		}
		return nil
	case <-ctx.Done():
		return commitError(kerr.New(kerr.RequestTimedOut, "deleting group %q: %v; the delete goes on", gid, ctx.Err()))
	}
}

// checkDeletable refuses to delete a group with members or commits being
// written (NON_EMPTY_GROUP), one that does not exist, and one being
// deleted: only a delete makes a loaded group Dead, and until its write is
// done whether the group is gone is not known. c.mu held.
func checkDeletable(sh *shard, gid string) error {
	g := sh.groups[gid]
	switch {
	case g != nil && g.State == Dead:
		return kerr.New(kerr.CoordinatorNotAvailable, "group %q is being deleted", gid)
	case g != nil && g.Size() > 0:
		return kerr.New(kerr.NonEmptyGroup, "group %q has %d members", gid, g.Size())
	case g == nil && len(sh.offsets[gid]) == 0:
		return kerr.New(kerr.GroupIDNotFound, "group %q does not exist", gid)
	case len(sh.inflight[gid]) > 0:
		return kerr.New(kerr.NonEmptyGroup, "group %q has commits being written", gid)
	}
	return nil
}

// pendingDelete is what a delete takes away until its write is done: the
// group as it was (created for offsets without a group record) and its
// offsets.
type pendingDelete struct {
	g       *Group
	created bool
	state   State
	since   time.Time
	offsets map[TP]committed
}

// startDeleteLocked marks gid Dead, stops serving its offsets and queues
// the tombstones of the group and each offset; the returned channel gets
// the write's outcome. The offsets are the batch's drops, so a commit of
// one orders after the tombstones. c.mu held.
func (c *Coordinator) startDeleteLocked(sh *shard, gid string) <-chan error {
	now := c.now()
	d := pendingDelete{g: sh.groups[gid], offsets: sh.offsets[gid]}
	if d.g == nil {
		d.g, d.created = NewGroup(gid, now), true
		sh.groups[gid] = d.g
	}
	d.state, d.since = d.g.State, d.g.StateSince
	d.g.Kill(now, nil)
	delete(sh.offsets, gid)
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: now.UnixMilli(), Key: GroupKey(gid)})
	drops := make([]groupTP, 0, len(d.offsets))
	for _, tp := range sortedTPs(d.offsets) {
		b.Append(recordbatch.Record{Timestamp: now.UnixMilli(), Key: OffsetKey(gid, tp.Topic, tp.Partition)})
		drops = append(drops, groupTP{gid, tp})
	}
	// Queued behind the group's earlier records, so none lands after
	// its tombstone.
	batch := clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
	return c.writeThenLocked(sh, batch, func(err error) { c.settleDeleteLocked(sh, d, err) }, drops...)
}

// settleDeleteLocked ends a delete with its write's outcome: tombstones in
// the log forget the group; a write refused before reaching the log puts
// the group back as it was, in its state since the moment it entered it
// (an Empty group's offsets still expire retention after it became
// Empty). A write that reached the log but was not acknowledged in time
// counts as done, as in Kafka's coordinator: its tombstones commit once
// the ISR shrinks past the dead follower, and a group put back would
// serve offsets the next load no longer has. A shard unloaded meanwhile
// has nothing to settle: the next load reads the outcome from the log.
// c.mu held.
func (c *Coordinator) settleDeleteLocked(sh *shard, d pendingDelete, err error) {
	gid := d.g.ID
	if c.shards[sh.partition] != sh || sh.groups[gid] != d.g {
		return
	}
	if err == nil || reachedTheLog(err) {
		delete(sh.groups, gid)
		c.log.Info("deleted group", "group", gid, "offsets", len(d.offsets), "acknowledged", err == nil)
		return
	}
	if d.created {
		delete(sh.groups, gid)
	} else {
		d.g.transition(d.state, d.since)
	}
	if len(d.offsets) > 0 {
		// Nothing committed meanwhile: a commit to a Dead group is refused.
		sh.offsets[gid] = d.offsets
	}
	c.log.Warn("deleting group failed; it is kept", "group", gid, "err", err)
}

// reachedTheLog reports whether a failed acks=all write is in the leader's
// log all the same: it timed out waiting for the followers, or committed
// with the ISR below min.insync.replicas.
func reachedTheLog(err error) bool {
	switch kerr.CodeOf(err) {
	case kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend:
		return true
	}
	return false
}

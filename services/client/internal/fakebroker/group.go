package fakebroker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// Group states, Kafka's names.
const (
	stateEmpty     = "Empty"
	statePreparing = "PreparingRebalance"
	stateComplete  = "CompletingRebalance"
	stateStable    = "Stable"
)

// groups is the coordinator of every group: one broker (broker 1 unless
// moved) answers for all of them, the others say NOT_COORDINATOR naming
// it. It follows Kafka's classic protocol: a join moves the group to
// PreparingRebalance until every member rejoined (or the rebalance timeout
// removed the rest), the first member to join leads, SyncGroup hands out
// the leader's assignment, heartbeats and commits are fenced by member id,
// instance id and generation, and a member silent for its session timeout
// is removed.
type groups struct {
	mu      sync.Mutex // guards everything below
	coord   int32
	byID    map[string]*group
	nextID  int
	changed chan struct{} // closed and replaced on every change
	stop    chan struct{}
}

type group struct {
	id         string
	state      string
	generation int32
	protoType  string
	protocol   string
	leader     string
	members    map[string]*gmember
	static     map[string]string    // instance id → member id
	pending    map[string]bool      // ids handed out with MEMBER_ID_REQUIRED
	deadline   time.Time            // of the join phase
	offsets    map[string]committed // "topic/partition" → its commit
	rebalances int
}

// committed is a group's commit of one partition.
type committed struct {
	offset int64
	epoch  int32 // the leader epoch of the last consumed record; -1 unknown
}

type gmember struct {
	id, instance, clientID string
	protocols              []*groupv1.JoinGroupProtocol
	session, rebalance     time.Duration
	lastSeen               time.Time
	joined                 bool // has joined the current join phase
	assignment             []byte
	// joinResp is the answer to its JoinGroup, made when the join phase
	// completes (as Kafka answers every waiting join at once), so a new
	// join phase starting before the waiter wakes does not lose it.
	joinResp *groupv1.JoinGroupResponse
}

func newGroups() *groups {
	g := &groups{coord: 1, byID: map[string]*group{}, changed: make(chan struct{}), stop: make(chan struct{})}
	go g.expire()
	return g
}

func (gs *groups) close() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	select {
	case <-gs.stop:
	default:
		close(gs.stop)
	}
}

func (gs *groups) broadcastLocked() {
	close(gs.changed)
	gs.changed = make(chan struct{})
}

// waitLocked releases the lock until something changes, ctx ends or d
// passes; it reports false when ctx ended.
func (gs *groups) waitLocked(ctx context.Context, d time.Duration) bool {
	ch := gs.changed
	gs.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	defer gs.mu.Lock()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// expire removes silent members and ends join phases that ran out of time.
func (gs *groups) expire() {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-gs.stop:
			return
		case <-t.C:
		}
		gs.mu.Lock()
		now := time.Now()
		for _, g := range gs.byID {
			for id, m := range g.members {
				if g.state == statePreparing && m.joined {
					continue // waiting in JoinGroup
				}
				if now.Sub(m.lastSeen) > m.session {
					gs.removeLocked(g, id)
				}
			}
			gs.maybeCompleteJoinLocked(g)
		}
		gs.mu.Unlock()
	}
}

func (gs *groups) groupLocked(id string) *group {
	g := gs.byID[id]
	if g == nil {
		g = &group{id: id, state: stateEmpty, members: map[string]*gmember{}, static: map[string]string{},
			pending: map[string]bool{}, offsets: map[string]committed{}}
		gs.byID[id] = g
	}
	return g
}

// rebalanceLocked starts a join phase: every member must join again.
func (gs *groups) rebalanceLocked(g *group) {
	if g.state == statePreparing {
		return
	}
	if len(g.members) == 0 {
		g.state = stateEmpty
		gs.broadcastLocked()
		return
	}
	g.state = statePreparing
	g.rebalances++
	var longest time.Duration
	for _, m := range g.members {
		m.joined = false
		longest = max(longest, m.rebalance)
	}
	g.deadline = time.Now().Add(longest)
	gs.broadcastLocked()
}

func (gs *groups) removeLocked(g *group, id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	if m.instance != "" && g.static[m.instance] == id {
		delete(g.static, m.instance)
	}
	if g.state == statePreparing {
		gs.broadcastLocked()
		return
	}
	gs.rebalanceLocked(g)
}

// maybeCompleteJoinLocked ends the join phase once every member joined or
// the deadline passed (removing those that did not join).
func (gs *groups) maybeCompleteJoinLocked(g *group) {
	if g.state != statePreparing {
		return
	}
	all := true
	for _, m := range g.members {
		all = all && m.joined
	}
	if !all && time.Now().Before(g.deadline) {
		return
	}
	for id, m := range g.members {
		if !m.joined {
			delete(g.members, id)
			if m.instance != "" {
				delete(g.static, m.instance)
			}
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.state = stateEmpty
		gs.broadcastLocked()
		return
	}
	ids := slices.Sorted(mapKeys(g.members))
	if g.members[g.leader] == nil {
		g.leader = ids[0]
	}
	g.protocol = ""
	for _, p := range g.members[g.leader].protocols {
		every := true
		for _, m := range g.members {
			every = every && slices.ContainsFunc(m.protocols, func(q *groupv1.JoinGroupProtocol) bool { return q.GetName() == p.GetName() })
		}
		if every {
			g.protocol = p.GetName()
			break
		}
	}
	for id, m := range g.members {
		m.assignment = nil
		m.lastSeen = time.Now()
		m.joinResp = &groupv1.JoinGroupResponse{GenerationId: g.generation, ProtocolType: g.protoType, ProtocolName: g.protocol,
			Leader: g.leader, MemberId: id}
		if id == g.leader {
			for _, mid := range ids {
				mm := g.members[mid]
				var meta []byte
				for _, p := range mm.protocols {
					if p.GetName() == g.protocol {
						meta = p.GetMetadata()
					}
				}
				m.joinResp.Members = append(m.joinResp.Members, &groupv1.JoinGroupMember{MemberId: mid, GroupInstanceId: mm.instance, Metadata: meta})
			}
		}
	}
	g.state = stateComplete
	gs.broadcastLocked()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// groupService is one broker's GroupService.
type groupService struct {
	groupv1.UnimplementedGroupServiceServer
	c *Cluster
	n *node
}

var _ groupv1.GroupServiceServer = (*groupService)(nil)

// enter counts the call, applies the test's fault, and answers
// NOT_COORDINATOR (naming the coordinator) on other brokers.
func (s *groupService) enter(ctx context.Context, method string, coordinatorOnly bool) error {
	if f := s.c.intercept(ctx, s.n, method, "", 0); f != nil {
		return kerr.New(f.Code, "injected by the test on broker %d", s.n.id)
	}
	if !coordinatorOnly {
		return nil
	}
	gs := s.c.groups
	gs.mu.Lock()
	coord := gs.coord
	gs.mu.Unlock()
	if coord == s.n.id {
		return nil
	}
	e := kerr.New(kerr.NotCoordinator, "broker %d is not the coordinator", s.n.id)
	e.Coordinator = &kerr.NodeHint{ID: coord, Address: s.c.BrokerAddr(coord)}
	return e
}

func errf(code kerr.Code, format string, args ...any) error {
	return kerr.New(code, format, args...)
}

func (s *groupService) FindCoordinator(ctx context.Context, req *groupv1.FindCoordinatorRequest) (*groupv1.FindCoordinatorResponse, error) {
	if err := s.enter(ctx, "FindCoordinator", false); err != nil {
		return nil, err
	}
	gs := s.c.groups
	gs.mu.Lock()
	coord := gs.coord
	gs.mu.Unlock()
	return &groupv1.FindCoordinatorResponse{Coordinator: &commonv1.Node{Id: coord, Address: s.c.BrokerAddr(coord)}}, nil
}

func (s *groupService) JoinGroup(ctx context.Context, req *groupv1.JoinGroupRequest) (*groupv1.JoinGroupResponse, error) {
	if err := s.enter(ctx, "JoinGroup", true); err != nil {
		return nil, err
	}
	gs := s.c.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groupLocked(req.GetGroupId())
	if g.protoType != "" && len(g.members) > 0 && req.GetProtocolType() != g.protoType {
		return nil, errf(kerr.InconsistentGroupProtocol, "group %s uses %q", g.id, g.protoType)
	}
	g.protoType = req.GetProtocolType()
	id, inst := req.GetMemberId(), req.GetGroupInstanceId()
	newID := func() string {
		gs.nextID++
		return fmt.Sprintf("%s-%d", or(req.GetClientId(), "member"), gs.nextID)
	}
	switch {
	case inst != "":
		old, known := g.static[inst]
		switch {
		case known && id != "" && id != old:
			return nil, errf(kerr.FencedInstanceID, "instance %s is member %s", inst, old)
		case known && id == "":
			// A static member back: it replaces its old id (fencing it).
			m := g.members[old]
			delete(g.members, old)
			id = newID()
			m.id = id
			g.members[id] = m
			g.static[inst] = id
			if g.leader == old {
				g.leader = id
			}
			m.protocols, m.lastSeen = req.GetProtocols(), time.Now()
			if g.state == stateStable {
				resp := &groupv1.JoinGroupResponse{GenerationId: g.generation, ProtocolType: g.protoType, ProtocolName: g.protocol,
					Leader: g.leader, MemberId: id, SkipAssignment: g.leader == id}
				gs.broadcastLocked()
				return resp, nil
			}
		case !known:
			id = newID()
			g.static[inst] = id
		}
	case id == "":
		id = newID()
		g.pending[id] = true
		e := kerr.New(kerr.MemberIDRequired, "join again with the member id")
		e.MemberID = id
		return nil, e
	case g.members[id] == nil && !g.pending[id]:
		return nil, errf(kerr.UnknownMemberID, "no member %s", id)
	}
	delete(g.pending, id)
	m := g.members[id]
	if m == nil {
		m = &gmember{id: id, instance: inst}
		g.members[id] = m
	}
	m.clientID, m.protocols = req.GetClientId(), req.GetProtocols()
	m.session = time.Duration(req.GetSessionTimeoutMs()) * time.Millisecond
	m.rebalance = max(time.Duration(req.GetRebalanceTimeoutMs())*time.Millisecond, m.session)
	m.lastSeen = time.Now()
	gs.rebalanceLocked(g)
	m.joined = true
	gs.broadcastLocked()
	m.joinResp = nil
	for {
		gs.maybeCompleteJoinLocked(g)
		if resp := m.joinResp; resp != nil {
			m.joinResp = nil
			return resp, nil
		}
		if g.members[id] != m {
			return nil, errf(kerr.UnknownMemberID, "member %s was removed", id)
		}
		if !gs.waitLocked(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

// checkMemberLocked fences a request by member id, instance id and generation.
func checkMemberLocked(g *group, id, inst string, gen int32) (*gmember, error) {
	if inst != "" {
		if cur, ok := g.static[inst]; ok && cur != id {
			return nil, errf(kerr.FencedInstanceID, "instance %s is member %s now", inst, cur)
		}
	}
	m := g.members[id]
	if m == nil {
		return nil, errf(kerr.UnknownMemberID, "no member %s", id)
	}
	if gen != g.generation {
		return nil, errf(kerr.IllegalGeneration, "generation %d, not %d", g.generation, gen)
	}
	return m, nil
}

func (s *groupService) SyncGroup(ctx context.Context, req *groupv1.SyncGroupRequest) (*groupv1.SyncGroupResponse, error) {
	if err := s.enter(ctx, "SyncGroup", true); err != nil {
		return nil, err
	}
	gs := s.c.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groupLocked(req.GetGroupId())
	m, err := checkMemberLocked(g, req.GetMemberId(), req.GetGroupInstanceId(), req.GetGenerationId())
	if err != nil {
		return nil, err
	}
	if g.state == statePreparing {
		return nil, errf(kerr.RebalanceInProgress, "rebalancing")
	}
	m.lastSeen = time.Now()
	if req.GetMemberId() == g.leader && g.state == stateComplete {
		for _, a := range req.GetAssignments() {
			if mm := g.members[a.GetMemberId()]; mm != nil {
				mm.assignment = a.GetAssignment()
			}
		}
		g.state = stateStable
		gs.broadcastLocked()
	}
	gen := g.generation
	for {
		if g.members[req.GetMemberId()] != m {
			return nil, errf(kerr.UnknownMemberID, "member removed")
		}
		if g.generation != gen || g.state == statePreparing {
			return nil, errf(kerr.RebalanceInProgress, "rebalancing")
		}
		if g.state == stateStable {
			return &groupv1.SyncGroupResponse{ProtocolType: g.protoType, ProtocolName: g.protocol, Assignment: m.assignment}, nil
		}
		if !gs.waitLocked(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

func (s *groupService) Heartbeat(ctx context.Context, req *groupv1.HeartbeatRequest) (*groupv1.HeartbeatResponse, error) {
	if err := s.enter(ctx, "Heartbeat", true); err != nil {
		return nil, err
	}
	gs := s.c.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groupLocked(req.GetGroupId())
	m, err := checkMemberLocked(g, req.GetMemberId(), req.GetGroupInstanceId(), req.GetGenerationId())
	if err != nil {
		return nil, err
	}
	m.lastSeen = time.Now()
	if g.state == statePreparing {
		return nil, errf(kerr.RebalanceInProgress, "rebalancing")
	}
	return &groupv1.HeartbeatResponse{}, nil
}

func (s *groupService) LeaveGroup(ctx context.Context, req *groupv1.LeaveGroupRequest) (*groupv1.LeaveGroupResponse, error) {
	if err := s.enter(ctx, "LeaveGroup", true); err != nil {
		return nil, err
	}
	gs := s.c.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groupLocked(req.GetGroupId())
	resp := &groupv1.LeaveGroupResponse{}
	for _, mi := range req.GetMembers() {
		r := &groupv1.LeaveGroupMemberResult{MemberId: mi.GetMemberId(), GroupInstanceId: mi.GetGroupInstanceId()}
		id := mi.GetMemberId()
		if mi.GetGroupInstanceId() != "" {
			id = g.static[mi.GetGroupInstanceId()]
		}
		if g.members[id] == nil {
			r.ErrorCode = commonv1.ErrorCode(kerr.UnknownMemberID)
		} else {
			gs.removeLocked(g, id)
		}
		resp.Members = append(resp.Members, r)
	}
	return resp, nil
}

func (s *groupService) OffsetCommit(ctx context.Context, req *groupv1.OffsetCommitRequest) (*groupv1.OffsetCommitResponse, error) {
	if err := s.enter(ctx, "OffsetCommit", true); err != nil {
		return nil, err
	}
	gs := s.c.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groupLocked(req.GetGroupId())
	if req.GetGenerationId() >= 0 || req.GetMemberId() != "" {
		if _, err := checkMemberLocked(g, req.GetMemberId(), req.GetGroupInstanceId(), req.GetGenerationId()); err != nil {
			return nil, err
		}
		if g.state == stateComplete {
			return nil, errf(kerr.RebalanceInProgress, "rebalancing")
		}
	} else if len(g.members) > 0 {
		return nil, errf(kerr.UnknownMemberID, "the group has members")
	}
	resp := &groupv1.OffsetCommitResponse{}
	for _, t := range req.GetTopics() {
		rt := &groupv1.OffsetCommitTopicResult{Name: t.GetName()}
		for _, p := range t.GetPartitions() {
			g.offsets[fmt.Sprintf("%s/%d", t.GetName(), p.GetPartition())] = committed{p.GetCommittedOffset(), p.GetCommittedLeaderEpoch()}
			rt.Partitions = append(rt.Partitions, &groupv1.OffsetCommitPartitionResult{Partition: p.GetPartition()})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (s *groupService) OffsetFetch(ctx context.Context, req *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	if err := s.enter(ctx, "OffsetFetch", true); err != nil {
		return nil, err
	}
	gs := s.c.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groupLocked(req.GetGroupId())
	resp := &groupv1.OffsetFetchResponse{}
	for _, t := range req.GetTopics() {
		rt := &groupv1.OffsetFetchTopicResult{Name: t.GetName()}
		for _, p := range t.GetPartitions() {
			off, ok := g.offsets[fmt.Sprintf("%s/%d", t.GetName(), p)]
			if !ok {
				off = committed{-1, -1}
			}
			rt.Partitions = append(rt.Partitions, &groupv1.OffsetFetchPartition{Partition: p, CommittedOffset: off.offset, CommittedLeaderEpoch: off.epoch})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// MoveCoordinator makes broker id the coordinator of every group, with
// their state (as a new leader of __consumer_offsets loads it).
func (c *Cluster) MoveCoordinator(id int32) {
	c.groups.mu.Lock()
	defer c.groups.mu.Unlock()
	c.groups.coord = id
	c.groups.broadcastLocked()
}

// GroupState returns a group's state, generation and member count.
func (c *Cluster) GroupState(group string) (state string, generation int32, members int) {
	c.groups.mu.Lock()
	defer c.groups.mu.Unlock()
	g := c.groups.groupLocked(group)
	return g.state, g.generation, len(g.members)
}

// Committed returns a group's committed offset of topic-partition (-1 when none).
func (c *Cluster) Committed(group, topic string, partition int32) int64 {
	off, _ := c.CommittedWithEpoch(group, topic, partition)
	return off
}

// CommittedWithEpoch returns a group's committed offset of topic-partition
// and the leader epoch committed with it (-1, -1 when none).
func (c *Cluster) CommittedWithEpoch(group, topic string, partition int32) (int64, int32) {
	c.groups.mu.Lock()
	defer c.groups.mu.Unlock()
	off, ok := c.groups.groupLocked(group).offsets[fmt.Sprintf("%s/%d", topic, partition)]
	if !ok {
		return -1, -1
	}
	return off.offset, off.epoch
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

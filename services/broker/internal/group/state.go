package group

import (
	"slices"
	"time"

	"tidemark.io/services/platform/kerr"
)

// State is a group's state in Kafka's classic protocol.
type State int

// The states. A group is Empty with no members (it may still have committed
// offsets), PreparingRebalance while it waits for its members to (re)join,
// CompletingRebalance while it waits for the leader's assignment, Stable
// once every member has it, Dead once deleted or unloaded.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s State) String() string { return stateNames[s] }

// ParseState reads a state name, in any case; false when unknown.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if equalFold(n, s) {
			return State(i), true
		}
	}
	return 0, false
}

// Limits are the coordinator's settings that bound what members may ask.
type Limits struct {
	MinSessionTimeout     time.Duration
	MaxSessionTimeout     time.Duration
	InitialRebalanceDelay time.Duration
	MaxSize               int
}

// Protocol is one protocol a member supports, with its opaque metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// Member is one member of a group.
type Member struct {
	ID               string
	InstanceID       string
	ClientID         string
	ClientHost       string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol
	Assignment       []byte

	// awaitingJoin and awaitingSync: the member has a JoinGroup or
	// SyncGroup parked until the rebalance reaches it; such a member is
	// kept alive without heartbeats (its request is its heartbeat).
	awaitingJoin bool
	awaitingSync bool
	// synced: the member has sent SyncGroup in the current generation
	// (the pending-sync rule of Tick).
	synced bool
	// deadline is when the member's session ends without a heartbeat.
	deadline time.Time
}

// metadataFor returns the member's metadata for protocol name.
func (m *Member) metadataFor(name string) ([]byte, bool) {
	for _, p := range m.Protocols {
		if p.Name == name {
			return p.Metadata, true
		}
	}
	return nil, false
}

// Group is one consumer group's membership state machine. It does no I/O
// and reads no clock: every method takes the time, and answers to requests
// parked earlier come back as Effects for the caller to deliver. Callers
// serialise access (the coordinator holds its lock around every call).
type Group struct {
	ID           string
	State        State
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	// StateSince is when the group last changed state; zero when unknown
	// (loaded from a record that did not carry it).
	StateSince time.Time

	members map[string]*Member
	// order is the members' join order: the first becomes leader when the
	// leader leaves (Kafka picks any; joining order is deterministic).
	order []string
	// static maps group.instance.id to the member id that holds it.
	static map[string]string
	// pending are member ids handed out with MEMBER_ID_REQUIRED (KIP-394)
	// that have not joined yet, with the time they expire.
	pending map[string]time.Time

	// rebalanceDeadline ends the join phase of a rebalance; initialJoin
	// marks the delayed first rebalance of an empty group, which waits
	// out its delay instead of completing as soon as everyone joined.
	rebalanceDeadline time.Time
	rebalanceStart    time.Time
	initialJoin       bool
	// syncDeadline ends the wait for every member of a new generation to
	// send SyncGroup (the rebalance timeout after the join phase): zero
	// when no generation is waiting.
	syncDeadline time.Time
	// subscribed are the topics the members of the current generation
	// subscribe to, read from their consumer-protocol metadata when the
	// generation formed (Kafka's subscribedTopics); nil when unknown
	// (another protocol type, metadata that does not decode). While the
	// group is Stable, offsets of other topics expire (coordinator.expire).
	subscribed map[string]bool
}

// NewGroup returns an empty group.
func NewGroup(id string, now time.Time) *Group {
	return &Group{ID: id, State: Empty, StateSince: now, members: map[string]*Member{}, static: map[string]string{}, pending: map[string]time.Time{}}
}

// JoinRequest is a JoinGroup as the state machine sees it.
type JoinRequest struct {
	MemberID         string
	InstanceID       string
	ClientID         string
	ClientHost       string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol
	// NewMemberID is the id to hand out if the member needs one; the
	// caller makes it (clientID-uuid) so the machine stays deterministic.
	NewMemberID string
}

// JoinResult is a JoinGroup's answer.
type JoinResult struct {
	Err            *kerr.Error
	MemberID       string
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	SkipAssignment bool
	// Members is filled for the leader only.
	Members []JoinedMember
}

// JoinedMember is a member as the leader sees it.
type JoinedMember struct {
	MemberID   string
	InstanceID string
	Metadata   []byte
}

// SyncResult is a SyncGroup's answer.
type SyncResult struct {
	Err          *kerr.Error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Effects are the answers to parked requests that a step produced, and
// whether the group's persisted form changed.
type Effects struct {
	Joins map[string]JoinResult
	Syncs map[string]SyncResult
	// Persist: write the group's metadata (or its tombstone when Dead or
	// empty of members).
	Persist bool
}

func (e *Effects) join(id string, r JoinResult) {
	if e.Joins == nil {
		e.Joins = map[string]JoinResult{}
	}
	e.Joins[id] = r
}

func (e *Effects) sync(id string, r SyncResult) {
	if e.Syncs == nil {
		e.Syncs = map[string]SyncResult{}
	}
	e.Syncs[id] = r
}

// Members returns the members in join order.
func (g *Group) Members() []*Member {
	out := make([]*Member, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.members[id])
	}
	return out
}

// Member returns a member by id.
func (g *Group) Member(id string) (*Member, bool) {
	m, ok := g.members[id]
	return m, ok
}

// HasPending reports whether member ids handed out are still to join.
func (g *Group) HasPending() bool { return len(g.pending) > 0 }

// Size is the number of members.
func (g *Group) Size() int { return len(g.members) }

func (g *Group) transition(s State, now time.Time) {
	g.State, g.StateSince = s, now
}

// Join handles a JoinGroup. A nil result means the request is parked under
// parkedID: its answer comes back in a later step's Effects.Joins (possibly
// this step's own).
func (g *Group) Join(now time.Time, lim Limits, req JoinRequest) (res *JoinResult, parkedID string, eff Effects) {
	fail := func(err *kerr.Error) (*JoinResult, string, Effects) {
		return &JoinResult{Err: err, MemberID: req.MemberID}, "", Effects{}
	}
	if g.State == Dead {
		return fail(kerr.New(kerr.CoordinatorNotAvailable, "group %q is being deleted or unloaded", g.ID))
	}
	if req.SessionTimeout < lim.MinSessionTimeout || req.SessionTimeout > lim.MaxSessionTimeout {
		return fail(kerr.BadField(kerr.InvalidSessionTimeout, "session_timeout_ms", "%d is outside [%d, %d] (group.min/max.session.timeout.ms)",
			req.SessionTimeout.Milliseconds(), lim.MinSessionTimeout.Milliseconds(), lim.MaxSessionTimeout.Milliseconds()))
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return fail(kerr.New(kerr.InconsistentGroupProtocol, "a join needs a protocol_type and at least one protocol"))
	}
	if len(g.members) > 0 && !g.supports(req.ProtocolType, req.Protocols) {
		return fail(kerr.New(kerr.InconsistentGroupProtocol, "group %q uses protocol type %q with protocols no member's set %v shares", g.ID, g.ProtocolType, protocolNames(req.Protocols)))
	}

	if req.MemberID == "" {
		if req.InstanceID != "" {
			if old, ok := g.static[req.InstanceID]; ok {
				return g.replaceStatic(now, lim, old, req)
			}
			// A new static member joins at once (no second round trip).
			if g.full(lim) {
				return fail(kerr.New(kerr.GroupMaxSizeReached, "group %q has %d members (group.max.size)", g.ID, len(g.members)))
			}
			return g.addAndPark(now, lim, req.NewMemberID, req)
		}
		// KIP-394: hand out an id and make the member come back with it,
		// so a member whose answer was lost is not counted twice.
		g.pending[req.NewMemberID] = now.Add(req.SessionTimeout)
		return &JoinResult{MemberID: req.NewMemberID, Err: &kerr.Error{Code: kerr.MemberIDRequired,
			Message: "join again with the member id in this answer", MemberID: req.NewMemberID}}, "", Effects{}
	}

	if err := g.checkInstance(req.MemberID, req.InstanceID); err != nil {
		return fail(err)
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		if _, isPending := g.pending[req.MemberID]; isPending && req.InstanceID == "" {
			delete(g.pending, req.MemberID)
			if g.full(lim) {
				return fail(kerr.New(kerr.GroupMaxSizeReached, "group %q has %d members (group.max.size)", g.ID, len(g.members)))
			}
			return g.addAndPark(now, lim, req.MemberID, req)
		}
		return fail(kerr.New(kerr.UnknownMemberID, "member %q is not in group %q", req.MemberID, g.ID))
	}

	if g.State == PreparingRebalance && !m.awaitingJoin && g.OverCapacity(lim) && g.awaitingJoins() >= lim.MaxSize {
		// KIP-389: a group over group.max.size (lowered since its members
		// joined) sheds the members that rejoin last, as Kafka does.
		g.remove(m.ID)
		return &JoinResult{Err: kerr.New(kerr.GroupMaxSizeReached, "group %q already has %d members rejoining (group.max.size)", g.ID, lim.MaxSize)},
			"", g.maybeCompleteJoin(now)
	}
	changed := !sameProtocols(m.Protocols, req.Protocols)
	m.Protocols, m.ClientID, m.ClientHost = req.Protocols, req.ClientID, req.ClientHost
	m.SessionTimeout, m.RebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	switch g.State {
	case PreparingRebalance:
		m.awaitingJoin = true
		eff = g.maybeCompleteJoin(now)
		return nil, m.ID, eff
	case CompletingRebalance, Stable:
		if !changed && (g.State == CompletingRebalance || m.ID != g.Leader) {
			// A member that lost its join answer gets it again.
			m.deadline = now.Add(m.SessionTimeout)
			r := g.joinResult(m.ID)
			return &r, "", Effects{}
		}
		m.awaitingJoin = true
		eff = g.prepareRebalance(now)
		eff2 := g.maybeCompleteJoin(now)
		return nil, m.ID, merge(eff, eff2)
	}
	return fail(kerr.New(kerr.UnknownMemberID, "member %q is not in group %q", req.MemberID, g.ID))
}

// replaceStatic handles KIP-345's rejoin of a known group.instance.id
// without a member id: the instance gets a new member id and the old one is
// fenced. In a Stable group whose selected protocol the rejoin leaves as it
// is, nothing rebalances (as Kafka decides: the protocol's name, not its
// metadata bytes, which a restarted consumer always changes): the member
// gets its old assignment back (the leader is told to skip computing one).
func (g *Group) replaceStatic(now time.Time, lim Limits, oldID string, req JoinRequest) (*JoinResult, string, Effects) {
	old := g.members[oldID]
	newID := req.NewMemberID
	var eff Effects
	if old.awaitingJoin {
		eff.join(oldID, JoinResult{Err: kerr.New(kerr.FencedInstanceID, "instance %q rejoined as a new member", req.InstanceID), MemberID: oldID})
	}
	if old.awaitingSync {
		eff.sync(oldID, SyncResult{Err: kerr.New(kerr.FencedInstanceID, "instance %q rejoined as a new member", req.InstanceID)})
	}
	m := *old
	m.ID, m.ClientID, m.ClientHost = newID, req.ClientID, req.ClientHost
	m.Protocols, m.SessionTimeout, m.RebalanceTimeout = req.Protocols, req.SessionTimeout, req.RebalanceTimeout
	m.awaitingJoin, m.awaitingSync = false, false
	m.deadline = now.Add(m.SessionTimeout)
	delete(g.members, oldID)
	g.members[newID] = &m
	g.order[slices.Index(g.order, oldID)] = newID
	g.static[req.InstanceID] = newID
	if g.Leader == oldID {
		g.Leader = newID
	}
	if g.State == Stable && g.selectProtocol() == g.Protocol {
		g.subscribed = g.subscribedTopics()
		r := g.joinResult(newID)
		if newID == g.Leader {
			r.SkipAssignment = true
		} else {
			r.Members = nil
		}
		eff.Persist = true
		return &r, "", eff
	}
	m.awaitingJoin = true
	if g.State != PreparingRebalance {
		eff = merge(eff, g.prepareRebalance(now))
	}
	return nil, newID, merge(eff, g.maybeCompleteJoin(now))
}

func (g *Group) full(lim Limits) bool { return lim.MaxSize > 0 && len(g.members) >= lim.MaxSize }

// OverCapacity reports whether the group has more members than
// group.max.size allows (the limit was lowered since they joined).
func (g *Group) OverCapacity(lim Limits) bool { return lim.MaxSize > 0 && len(g.members) > lim.MaxSize }

// awaitingJoins counts the members whose JoinGroup waits in this join
// phase.
func (g *Group) awaitingJoins() int {
	n := 0
	for _, m := range g.members {
		if m.awaitingJoin {
			n++
		}
	}
	return n
}

// addAndPark adds a member whose JoinGroup waits for the join phase.
func (g *Group) addAndPark(now time.Time, lim Limits, id string, req JoinRequest) (*JoinResult, string, Effects) {
	m := &Member{ID: id, InstanceID: req.InstanceID, ClientID: req.ClientID, ClientHost: req.ClientHost,
		SessionTimeout: req.SessionTimeout, RebalanceTimeout: req.RebalanceTimeout, ProtocolType: req.ProtocolType,
		Protocols: req.Protocols, awaitingJoin: true, deadline: now.Add(req.SessionTimeout)}
	if len(g.members) == 0 {
		g.ProtocolType = req.ProtocolType
	}
	g.members[id] = m
	g.order = append(g.order, id)
	if req.InstanceID != "" {
		g.static[req.InstanceID] = id
	}
	var eff Effects
	switch g.State {
	case Empty:
		// The delayed first rebalance: wait for more members to arrive.
		g.transition(PreparingRebalance, now)
		// Without a delay it is an ordinary join phase: it ends when
		// everyone (handed-out ids included) joined, or at the rebalance
		// timeout.
		g.initialJoin = lim.InitialRebalanceDelay > 0
		g.rebalanceStart = now
		g.rebalanceDeadline = now.Add(req.RebalanceTimeout)
		if g.initialJoin {
			g.rebalanceDeadline = now.Add(min(lim.InitialRebalanceDelay, req.RebalanceTimeout))
		}
	case PreparingRebalance:
		if g.initialJoin {
			// Each arrival extends the delay, up to the rebalance timeout.
			g.rebalanceDeadline = minTime(now.Add(lim.InitialRebalanceDelay), g.rebalanceStart.Add(g.maxRebalanceTimeout()))
		}
	case CompletingRebalance, Stable:
		eff = g.prepareRebalance(now)
	}
	return nil, id, merge(eff, g.maybeCompleteJoin(now))
}

// prepareRebalance starts a rebalance: members waiting for their
// assignment are told to rejoin.
func (g *Group) prepareRebalance(now time.Time) Effects {
	var eff Effects
	if g.State == CompletingRebalance {
		for _, m := range g.members {
			if m.awaitingSync {
				m.awaitingSync = false
				eff.sync(m.ID, SyncResult{Err: kerr.New(kerr.RebalanceInProgress, "group %q is rebalancing: rejoin", g.ID)})
			}
		}
	}
	for _, m := range g.members {
		m.Assignment = nil
	}
	g.initialJoin = false
	g.syncDeadline = time.Time{}
	g.transition(PreparingRebalance, now)
	g.rebalanceStart = now
	g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
	return eff
}

func (g *Group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.RebalanceTimeout)
	}
	return d
}

// maybeCompleteJoin ends the join phase once every member has rejoined and
// no handed-out member id is still to come (not during the initial delay,
// which is waited out).
func (g *Group) maybeCompleteJoin(now time.Time) Effects {
	if g.State != PreparingRebalance || g.initialJoin || len(g.pending) > 0 {
		return Effects{}
	}
	for _, m := range g.members {
		if !m.awaitingJoin {
			return Effects{}
		}
	}
	return g.completeJoin(now)
}

// completeJoin ends the join phase: dynamic members that did not rejoin are
// removed, the next generation starts, the protocol and a leader among
// those that rejoined are chosen, and every waiting member gets its answer.
// A static member that did not rejoin keeps its place (KIP-345, as Kafka's
// onCompleteJoin): the leader assigns it partitions as before, and it gets
// them back if it returns within its session, which Tick ends otherwise;
// removing it meant a restart during someone else's rebalance moved its
// partitions away and rebalanced again on its return.
func (g *Group) completeJoin(now time.Time) Effects {
	var eff Effects
	rejoined := ""
	for _, id := range slices.Clone(g.order) {
		switch m := g.members[id]; {
		case m.awaitingJoin:
			if rejoined == "" || id == g.Leader {
				rejoined = id
			}
		case m.InstanceID == "":
			g.remove(id)
		}
	}
	if rejoined == "" && len(g.members) > 0 {
		// Only static members that have not rejoined are left: nobody
		// can compute an assignment. Wait again, as Kafka does, until one
		// rejoins or their sessions end.
		g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
		return eff
	}
	g.initialJoin = false
	g.Generation++
	if len(g.members) == 0 {
		// The protocol type stays, as Kafka's initNextGeneration keeps it:
		// DescribeGroups and ListGroups show an emptied consumer group as
		// "consumer", and only a group no member ever joined (offsets
		// committed from outside) has none.
		g.Protocol, g.Leader = "", ""
		g.transition(Empty, now)
		eff.Persist = true
		return eff
	}
	g.Protocol = g.selectProtocol()
	g.Leader = rejoined
	g.subscribed = g.subscribedTopics()
	g.transition(CompletingRebalance, now)
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for _, m := range g.members {
		m.synced = false
		m.deadline = now.Add(m.SessionTimeout)
		if m.awaitingJoin {
			m.awaitingJoin = false
			eff.join(m.ID, g.joinResult(m.ID))
		}
	}
	return eff
}

func (g *Group) joinResult(id string) JoinResult {
	r := JoinResult{MemberID: id, Generation: g.Generation, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Leader: g.Leader}
	if id == g.Leader {
		for _, oid := range g.order {
			m := g.members[oid]
			md, _ := m.metadataFor(g.Protocol)
			r.Members = append(r.Members, JoinedMember{MemberID: m.ID, InstanceID: m.InstanceID, Metadata: md})
		}
	}
	return r
}

// selectProtocol picks the protocol every member supports that most
// members list first (ties go to the leader's order), as Kafka's vote.
func (g *Group) selectProtocol() string {
	candidates := map[string]bool{}
	first := g.members[g.order[0]]
	for _, p := range first.Protocols {
		candidates[p.Name] = true
	}
	for _, m := range g.members {
		have := map[string]bool{}
		for _, p := range m.Protocols {
			have[p.Name] = true
		}
		for c := range candidates {
			if !have[c] {
				delete(candidates, c)
			}
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.Protocols {
			if candidates[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, p := range first.Protocols {
		if candidates[p.Name] && votes[p.Name] > bestVotes {
			best, bestVotes = p.Name, votes[p.Name]
		}
	}
	return best
}

// supports reports whether a joining member fits the group: the same
// protocol type and a protocol every current member supports.
func (g *Group) supports(protocolType string, ps []Protocol) bool {
	if protocolType != g.ProtocolType {
		return false
	}
	for _, p := range ps {
		all := true
		for _, m := range g.members {
			if _, ok := m.metadataFor(p.Name); !ok {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// checkInstance fences a static member whose instance id is now held by
// another member id (KIP-345).
func (g *Group) checkInstance(memberID, instanceID string) *kerr.Error {
	if instanceID == "" {
		return nil
	}
	if holder, ok := g.static[instanceID]; ok && holder != memberID {
		return kerr.New(kerr.FencedInstanceID, "instance %q of group %q is held by member %q, not %q", instanceID, g.ID, holder, memberID)
	}
	return nil
}

// checkMember is the fence of Sync, Heartbeat and OffsetCommit.
func (g *Group) checkMember(memberID, instanceID string, generation int32) (*Member, *kerr.Error) {
	if g.State == Dead {
		return nil, kerr.New(kerr.CoordinatorNotAvailable, "group %q is being deleted or unloaded", g.ID)
	}
	if err := g.checkInstance(memberID, instanceID); err != nil {
		return nil, err
	}
	m, ok := g.members[memberID]
	if !ok {
		return nil, kerr.New(kerr.UnknownMemberID, "member %q is not in group %q", memberID, g.ID)
	}
	if generation != g.Generation {
		return nil, kerr.New(kerr.IllegalGeneration, "generation %d of group %q is not the current %d", generation, g.ID, g.Generation)
	}
	return m, nil
}

func (g *Group) remove(id string) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	delete(g.members, id)
	g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	if m.InstanceID != "" && g.static[m.InstanceID] == id {
		delete(g.static, m.InstanceID)
	}
}

// Sync handles a SyncGroup; a nil result means it is parked until the
// leader's assignment arrives.
func (g *Group) Sync(now time.Time, memberID, instanceID string, generation int32, protocolType, protocol string, assignments map[string][]byte) (*SyncResult, Effects) {
	m, err := g.checkMember(memberID, instanceID, generation)
	if err != nil {
		return &SyncResult{Err: err}, Effects{}
	}
	if (protocolType != "" && protocolType != g.ProtocolType) || (protocol != "" && protocol != g.Protocol) {
		return &SyncResult{Err: kerr.New(kerr.InconsistentGroupProtocol, "group %q uses %s/%s", g.ID, g.ProtocolType, g.Protocol)}, Effects{}
	}
	m.deadline = now.Add(m.SessionTimeout)
	if g.State != PreparingRebalance {
		m.synced = true
	}
	switch g.State {
	case PreparingRebalance:
		return &SyncResult{Err: kerr.New(kerr.RebalanceInProgress, "group %q is rebalancing: rejoin", g.ID)}, Effects{}
	case Stable:
		return &SyncResult{ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: m.Assignment}, Effects{}
	case CompletingRebalance:
		m.awaitingSync = true
		if memberID != g.Leader {
			return nil, Effects{}
		}
		var eff Effects
		for _, o := range g.members {
			o.Assignment = assignments[o.ID]
			if o.awaitingSync {
				o.awaitingSync = false
				eff.sync(o.ID, SyncResult{ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: o.Assignment})
			}
			o.deadline = now.Add(o.SessionTimeout)
		}
		g.transition(Stable, now)
		eff.Persist = true
		return nil, eff
	}
	return &SyncResult{Err: kerr.New(kerr.UnknownMemberID, "member %q is not in group %q", memberID, g.ID)}, Effects{}
}

// Heartbeat keeps a member's session alive. During the join phase it
// answers REBALANCE_IN_PROGRESS: the member must rejoin.
func (g *Group) Heartbeat(now time.Time, memberID, instanceID string, generation int32) *kerr.Error {
	if g.State == Empty {
		return kerr.New(kerr.UnknownMemberID, "group %q has no members", g.ID)
	}
	m, err := g.checkMember(memberID, instanceID, generation)
	if err != nil {
		return err
	}
	m.deadline = now.Add(m.SessionTimeout)
	if g.State == PreparingRebalance {
		return kerr.New(kerr.RebalanceInProgress, "group %q is rebalancing: rejoin", g.ID)
	}
	return nil
}

// Leave removes members at once. Each result is nil or the member's error.
func (g *Group) Leave(now time.Time, who []MemberIdentity) ([]*kerr.Error, Effects) {
	var eff Effects
	errs := make([]*kerr.Error, len(who))
	left := false
	for i, w := range who {
		id := w.MemberID
		if w.InstanceID != "" {
			holder, ok := g.static[w.InstanceID]
			switch {
			case !ok:
				errs[i] = kerr.New(kerr.UnknownMemberID, "instance %q is not in group %q", w.InstanceID, g.ID)
				continue
			case id != "" && holder != id:
				errs[i] = kerr.New(kerr.FencedInstanceID, "instance %q is held by member %q, not %q", w.InstanceID, holder, id)
				continue
			}
			id = holder
		}
		if _, ok := g.pending[id]; ok {
			delete(g.pending, id)
			continue
		}
		m, ok := g.members[id]
		if !ok {
			errs[i] = kerr.New(kerr.UnknownMemberID, "member %q is not in group %q", id, g.ID)
			continue
		}
		if m.awaitingJoin {
			eff.join(id, JoinResult{Err: kerr.New(kerr.UnknownMemberID, "member %q left group %q", id, g.ID), MemberID: id})
		}
		if m.awaitingSync {
			eff.sync(id, SyncResult{Err: kerr.New(kerr.UnknownMemberID, "member %q left group %q", id, g.ID)})
		}
		g.remove(id)
		left = true
	}
	if left {
		eff = merge(eff, g.membersChanged(now))
	}
	return errs, eff
}

// MemberIdentity names a member leaving.
type MemberIdentity struct {
	MemberID   string
	InstanceID string
}

// membersChanged rebalances after members went away.
func (g *Group) membersChanged(now time.Time) Effects {
	switch g.State {
	case Stable, CompletingRebalance:
		eff := g.prepareRebalance(now)
		return merge(eff, g.maybeCompleteJoin(now))
	case PreparingRebalance:
		return g.maybeCompleteJoin(now)
	}
	return Effects{}
}

// Tick applies the passage of time: members whose session ended without a
// heartbeat are removed (and the group rebalances), handed-out member ids
// expire, and a join phase whose deadline passed completes without the
// members that did not rejoin.
func (g *Group) Tick(now time.Time) Effects {
	var eff Effects
	for id, until := range g.pending {
		if !now.Before(until) {
			delete(g.pending, id)
		}
	}
	expired := false
	for _, id := range slices.Clone(g.order) {
		m := g.members[id]
		if m.awaitingJoin || m.awaitingSync || now.Before(m.deadline) {
			continue
		}
		g.remove(id)
		expired = true
	}
	if expired {
		eff = merge(eff, g.membersChanged(now))
	}
	eff = merge(eff, g.expirePendingSyncs(now))
	if g.State == PreparingRebalance && !now.Before(g.rebalanceDeadline) {
		eff = merge(eff, g.completeJoin(now))
	}
	if g.State == PreparingRebalance && len(g.pending) == 0 {
		eff = merge(eff, g.maybeCompleteJoin(now))
	}
	return eff
}

// expirePendingSyncs removes, once the rebalance timeout after the join
// phase passed, the members of the generation that never sent SyncGroup,
// and rebalances (Kafka's pending-sync expiry, since 3.2): a leader that
// heartbeats but never syncs held every other member's parked SyncGroup
// and the group in CompletingRebalance for ever.
func (g *Group) expirePendingSyncs(now time.Time) Effects {
	if g.syncDeadline.IsZero() || now.Before(g.syncDeadline) || (g.State != CompletingRebalance && g.State != Stable) {
		return Effects{}
	}
	g.syncDeadline = time.Time{}
	removed := false
	for _, id := range slices.Clone(g.order) {
		if !g.members[id].synced {
			g.remove(id)
			removed = true
		}
	}
	if !removed {
		return Effects{}
	}
	return g.membersChanged(now)
}

// CheckCommit is the fence of an OffsetCommit: a member of the current
// generation (commits are allowed while the group prepares a rebalance,
// so members can commit before rejoining, and refused while it waits for
// the assignment); or, with generation -1 and no member id, a commit from
// outside the group, only while it has no members.
func (g *Group) CheckCommit(now time.Time, memberID, instanceID string, generation int32) *kerr.Error {
	if g.State == Dead {
		// Being deleted (its tombstones are being written): a commit
		// acknowledged now would be lost with it, or bring it back at
		// the next load. Retriable, as Kafka answers it.
		return kerr.New(kerr.CoordinatorNotAvailable, "group %q is being deleted", g.ID)
	}
	if generation < 0 && memberID == "" && instanceID == "" {
		if len(g.members) > 0 {
			return kerr.New(kerr.UnknownMemberID, "group %q has members: only they may commit (generation -1 is for groups without members)", g.ID)
		}
		return nil
	}
	if g.State == Empty {
		return kerr.New(kerr.UnknownMemberID, "group %q has no members", g.ID)
	}
	m, err := g.checkMember(memberID, instanceID, generation)
	if err != nil {
		return err
	}
	if g.State == CompletingRebalance {
		return kerr.New(kerr.RebalanceInProgress, "group %q is waiting for its assignment", g.ID)
	}
	m.deadline = now.Add(m.SessionTimeout)
	return nil
}

// Value is the group's persisted form.
func (g *Group) Value() GroupValue {
	v := GroupValue{ProtocolType: g.ProtocolType, Generation: g.Generation, Protocol: g.Protocol, Leader: g.Leader, StateTimestamp: -1}
	if !g.StateSince.IsZero() {
		v.StateTimestamp = g.StateSince.UnixMilli()
	}
	for _, m := range g.Members() {
		md, _ := m.metadataFor(g.Protocol)
		v.Members = append(v.Members, MemberValue{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeout: int32(m.RebalanceTimeout.Milliseconds()), SessionTimeout: int32(m.SessionTimeout.Milliseconds()),
			Subscription: md, Assignment: m.Assignment})
	}
	return v
}

// Restore rebuilds a group from its persisted form, as a new coordinator
// does on load: with members it is Stable (they keep their generation and
// assignment, and each gets a fresh session from now), without it is Empty.
func Restore(id string, v GroupValue, now time.Time) *Group {
	g := NewGroup(id, now)
	g.Generation, g.ProtocolType, g.Protocol, g.Leader = v.Generation, v.ProtocolType, v.Protocol, v.Leader
	for _, mv := range v.Members {
		m := &Member{ID: mv.MemberID, InstanceID: mv.InstanceID, ClientID: mv.ClientID, ClientHost: mv.ClientHost,
			SessionTimeout: time.Duration(mv.SessionTimeout) * time.Millisecond, RebalanceTimeout: time.Duration(mv.RebalanceTimeout) * time.Millisecond,
			ProtocolType: v.ProtocolType, Protocols: []Protocol{{Name: v.Protocol, Metadata: mv.Subscription}}, Assignment: mv.Assignment}
		m.deadline = now.Add(m.SessionTimeout)
		m.synced = true // a persisted generation had its assignments
		g.members[m.ID] = m
		g.order = append(g.order, m.ID)
		if m.InstanceID != "" {
			g.static[m.InstanceID] = m.ID
		}
	}
	if len(g.members) > 0 {
		g.transition(Stable, now)
		g.subscribed = g.subscribedTopics()
	}
	// The time of its last change of state, as written: for an Empty
	// group, when it became Empty, where its offsets' retention counts
	// from across coordinator moves. A record without it (-1) leaves it
	// unknown, as Kafka reads it, and each offset then counts from its
	// commit; counted from the load, every move put the expiry off again.
	g.StateSince = time.Time{}
	if v.StateTimestamp > 0 {
		g.StateSince = time.UnixMilli(v.StateTimestamp)
	}
	return g
}

// StartSessions starts every member's session at now: a coordinator that
// loaded a group starts them once the load is done, since members could
// not heartbeat while it ran.
func (g *Group) StartSessions(now time.Time) {
	for _, m := range g.members {
		m.deadline = now.Add(m.SessionTimeout)
	}
}

// Rebalance starts a rebalance of a loaded group: its members learn of it
// at their next heartbeat and rejoin.
func (g *Group) Rebalance(now time.Time) { g.prepareRebalance(now) }

// Kill marks the group Dead (deleted or unloaded) and answers every parked
// request with err.
func (g *Group) Kill(now time.Time, err *kerr.Error) Effects {
	var eff Effects
	for _, m := range g.members {
		if m.awaitingJoin {
			eff.join(m.ID, JoinResult{Err: err, MemberID: m.ID})
		}
		if m.awaitingSync {
			eff.sync(m.ID, SyncResult{Err: err})
		}
	}
	g.transition(Dead, now)
	return eff
}

func merge(a, b Effects) Effects {
	for id, r := range b.Joins {
		a.join(id, r)
	}
	for id, r := range b.Syncs {
		a.sync(id, r)
	}
	a.Persist = a.Persist || b.Persist
	return a
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && string(x.Metadata) == string(y.Metadata) })
}

func protocolNames(ps []Protocol) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client/assign"
	"tidemark.io/services/platform/kerr"
)

// membership is the goroutine that keeps a GroupConsumer in its group:
// Kafka's classic protocol, JoinGroup, SyncGroup, then Heartbeat every
// heartbeat interval until the coordinator asks for a rebalance. Its fields
// are its own; what commits need is published to GroupConsumer.member.
type membership struct {
	gc         *GroupConsumer
	memberID   string
	generation int32
	owned      []TopicPartition // the assignment Poll was last told to read
	// counts are the partition counts the leader last assigned from, of
	// every topic the group subscribes to, 0 for one that did not exist
	// (nil when this member does not lead): a change means a new
	// assignment.
	counts map[string]int32
}

// errRejoin asks the loop to join again at once.
var errRejoin = errors.New("rejoin")

// errPollTimeout says Poll has not been called for max.poll.interval.ms.
var errPollTimeout = errors.New("consumer poll timeout has expired")

func (m *membership) run(ctx context.Context) {
	gc := m.gc
	for attempt := 1; ctx.Err() == nil; {
		err := m.joinAndSync(ctx)
		if err == nil {
			attempt = 1
			err = m.heartbeat(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errPollTimeout) {
			m.leaveOnPollTimeout(ctx)
			if !m.awaitPoll(ctx) {
				return
			}
			continue
		}
		if m.fatal(err) {
			gc.c.log.Warn("consumer stopped", "group", gc.opts.GroupID, "err", err)
			gc.setFatal(err)
			m.lose("fatal error")
			return
		}
		if err != nil && !errors.Is(err, errRejoin) {
			gc.c.log.Debug("group membership failed; joining again", "group", gc.opts.GroupID, "err", err)
			sleep(ctx, backoff(gc.c.opts.RetryBackoff, gc.c.opts.RetryBackoffMax, attempt))
			attempt++
		}
	}
}

// fatal reports errors no rejoin can cure: the member must stop.
func (m *membership) fatal(err error) bool {
	switch kerr.CodeOf(err) {
	case kerr.FencedInstanceID, kerr.InconsistentGroupProtocol, kerr.InvalidSessionTimeout,
		kerr.GroupAuthorizationFailed, kerr.GroupMaxSizeReached, kerr.InvalidGroupID,
		kerr.TopicAuthorizationFailed, kerr.InvalidConfig:
		return true
	}
	return false
}

// resetOn forgets the generation (and the member id on UNKNOWN_MEMBER_ID)
// after an answer saying this member's view of the group is over, and
// reports whether it was one; what the member owned is lost.
func (m *membership) resetOn(err error) bool {
	switch kerr.CodeOf(err) {
	case kerr.UnknownMemberID:
		m.memberID = ""
	case kerr.IllegalGeneration:
	default:
		return false
	}
	m.generation = -1
	m.publish()
	m.lose(kerr.CodeOf(err).String())
	return true
}

// leaveOnPollTimeout gives the member's place up because the user stopped
// calling Poll (a stuck or too slow record handler): as Kafka's consumer, a
// dynamic member sends LeaveGroup so its partitions move at once; a static
// one sends nothing and is removed when its session times out. Either way
// it forgets its generation and member id, and Poll hears its partitions
// were lost (no commit: the position may be past what was processed).
func (m *membership) leaveOnPollTimeout(ctx context.Context) {
	gc := m.gc
	o := gc.opts
	gc.c.log.Warn("consumer poll timeout has expired: leaving the group until the next Poll (Poll calls are further apart than max.poll.interval.ms)",
		"group", o.GroupID, "member", m.memberID, "max_poll_interval", o.RebalanceTimeout)
	if m.memberID != "" && o.InstanceID == "" {
		err := gc.coord.call(ctx, "leave group", o.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
			_, err := gs.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: o.GroupID,
				Members: []*groupv1.MemberIdentity{{MemberId: m.memberID, Reason: errPollTimeout.Error()}}})
			return err
		})
		if err != nil {
			gc.c.log.Debug("leave group on poll timeout", "group", o.GroupID, "err", err)
		}
	}
	m.memberID, m.generation = "", -1
	m.publish()
	m.lose("poll timeout")
}

// awaitPoll waits for the next Poll after a poll timeout; false when ctx
// ended first.
func (m *membership) awaitPoll(ctx context.Context) bool {
	for m.gc.pollExpired() {
		select {
		case <-m.gc.polled:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// lose tells Poll the owned partitions are no longer this member's.
func (m *membership) lose(why string) {
	if len(m.owned) == 0 {
		return
	}
	m.gc.c.log.Info("partitions lost", "group", m.gc.opts.GroupID, "why", why, "partitions", len(m.owned))
	m.gc.post(&rebalanceEvent{lost: m.owned})
	m.owned = nil
}

// publish makes the member id and generation visible to commits.
func (m *membership) publish() {
	m.gc.mu.Lock()
	m.gc.member = memberState{id: m.memberID, generation: m.generation}
	m.gc.mu.Unlock()
}

// wait waits until Poll has carried out ev, heartbeating meanwhile so the
// session stays alive, for at most the rebalance timeout. A user that has
// not called Poll for max.poll.interval.ms by then loses its place at once
// (errPollTimeout), as Kafka's consumer leaves at that interval: rejoining
// instead cost the group two more rebalances, and the revocation still
// queued for Poll committed, under the new generation, positions of
// partitions another member owned by then.
func (m *membership) wait(ctx context.Context, ev *rebalanceEvent) error {
	o := m.gc.opts
	limit := time.NewTimer(o.RebalanceTimeout)
	defer limit.Stop()
	tick := time.NewTicker(o.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ev.done:
			return nil
		case <-ctx.Done():
			return nil
		case <-limit.C:
			if m.gc.pollExpired() {
				return errPollTimeout
			}
			m.gc.c.log.Warn("rebalance callbacks not run within the rebalance timeout (is Poll being called?)", "group", o.GroupID)
			return nil
		case <-tick.C:
			if m.generation >= 0 {
				_ = m.heartbeatOnce(ctx)
			}
		}
	}
}

// joinAndSync runs one rebalance from this member's side.
func (m *membership) joinAndSync(ctx context.Context) error {
	gc := m.gc
	o := gc.opts
	if gc.protocol == assign.Eager && len(m.owned) > 0 {
		// Eager: give everything up (committing it) before joining.
		ev := gc.post(&rebalanceEvent{revoke: m.owned})
		m.owned = nil
		if err := m.wait(ctx, ev); err != nil {
			return err
		}
	}
	var join *groupv1.JoinGroupResponse
	for {
		sub := assign.Subscription{Topics: o.Topics, Owned: groupTPs(m.owned), Generation: m.generation, Rack: o.Rack}
		req := &groupv1.JoinGroupRequest{
			GroupId: o.GroupID, MemberId: m.memberID, GroupInstanceId: o.InstanceID, ClientId: o.ClientID,
			SessionTimeoutMs:   int32(o.SessionTimeout.Milliseconds()),
			RebalanceTimeoutMs: int32(o.RebalanceTimeout.Milliseconds()),
			ProtocolType:       assign.ProtocolType,
			Reason:             "joining",
		}
		for _, a := range o.Assignors {
			s := sub
			s.UserData = a.UserData(m.generation)
			req.Protocols = append(req.Protocols, &groupv1.JoinGroupProtocol{Name: a.Name(), Metadata: s.Encode()})
		}
		err := m.rebalanceCall(ctx, "join group", func(ctx context.Context, gs groupv1.GroupServiceClient) error {
			var err error
			join, err = gs.JoinGroup(ctx, req)
			return err
		})
		if err == nil {
			break
		}
		var ke *kerr.Error
		switch code := kerr.CodeOf(err); {
		case code == kerr.MemberIDRequired && errors.As(err, &ke) && ke.MemberID != "":
			m.memberID = ke.MemberID // KIP-394: join again with the id given
			continue
		case code == kerr.RebalanceInProgress:
			continue
		case m.resetOn(err):
			continue
		}
		return err
	}
	m.memberID, m.generation = join.GetMemberId(), join.GetGenerationId()
	m.publish()
	var assignments []*groupv1.SyncGroupAssignment
	if join.GetLeader() != m.memberID {
		m.counts = nil
	}
	if join.GetLeader() == m.memberID && !join.GetSkipAssignment() {
		var err error
		if assignments, err = m.assign(ctx, join); err != nil {
			return err
		}
	}
	var sync *groupv1.SyncGroupResponse
	err := m.rebalanceCall(ctx, "sync group", func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		var err error
		sync, err = gs.SyncGroup(ctx, &groupv1.SyncGroupRequest{
			GroupId: o.GroupID, GenerationId: m.generation, MemberId: m.memberID, GroupInstanceId: o.InstanceID,
			ProtocolType: assign.ProtocolType, ProtocolName: join.GetProtocolName(), Assignments: assignments,
		})
		return err
	})
	if err != nil {
		if m.resetOn(err) || kerr.CodeOf(err) == kerr.RebalanceInProgress {
			return errRejoin
		}
		return err
	}
	a, err := assign.DecodeAssignment(sync.GetAssignment())
	if err != nil {
		return kerr.New(kerr.InconsistentGroupProtocol, "group %s: the leader's assignment: %v", o.GroupID, err)
	}
	var got []TopicPartition
	for _, t := range a.Partitions {
		if !slices.Contains(o.Topics, t.Topic) {
			continue // not subscribed (the leader's view of our subscription is older)
		}
		for _, p := range t.Partitions {
			got = append(got, TopicPartition{t.Topic, p})
		}
	}
	got = sortedTPs(got)
	revoked := minus(m.owned, got)
	added := minus(got, m.owned)
	gc.c.log.Info("joined group", "group", o.GroupID, "member", m.memberID, "generation", m.generation,
		"protocol", join.GetProtocolName(), "assigned", len(got), "added", len(added), "revoked", len(revoked))
	m.owned = got
	ev := gc.post(&rebalanceEvent{revoke: revoked, assign: added})
	if len(revoked) > 0 {
		// KIP-429: once the revoked partitions are committed and let go,
		// rejoin so that the next generation hands them to their new owner.
		if err := m.wait(ctx, ev); err != nil {
			return err
		}
		return errRejoin
	}
	return nil
}

// rebalanceCall runs a JoinGroup or SyncGroup. The coordinator may hold
// either until every member has joined, up to the rebalance timeout, so
// both an attempt and the call, retries included, get
// max(API timeout, rebalance timeout + request timeout), as Kafka's
// JoinGroup waits the rebalance timeout and a margin. Bounded by the API
// timeout alone, a member gave up on a group that was still forming
// around a member joining late, and joined again.
func (m *membership) rebalanceCall(ctx context.Context, what string, fn func(context.Context, groupv1.GroupServiceClient) error) error {
	o := m.gc.opts
	limit := max(m.gc.c.opts.APITimeout, o.RebalanceTimeout+o.RequestTimeout)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return m.gc.coord.call(ctx, what, limit, fn)
}

// assign computes the group's assignment on the leader.
func (m *membership) assign(ctx context.Context, join *groupv1.JoinGroupResponse) ([]*groupv1.SyncGroupAssignment, error) {
	gc := m.gc
	var asg assign.Assignor
	for _, a := range gc.opts.Assignors {
		if a.Name() == join.GetProtocolName() {
			asg = a
		}
	}
	if asg == nil {
		return nil, kerr.New(kerr.InconsistentGroupProtocol, "group %s chose assignor %q, which this member does not have", gc.opts.GroupID, join.GetProtocolName())
	}
	var members []assign.Member
	partitions := map[string]int32{}
	for _, jm := range join.GetMembers() {
		sub, err := assign.DecodeSubscription(jm.GetMetadata())
		if err != nil {
			return nil, kerr.New(kerr.InconsistentGroupProtocol, "member %s: %v", jm.GetMemberId(), err)
		}
		members = append(members, assign.Member{ID: jm.GetMemberId(), InstanceID: jm.GetGroupInstanceId(), Subscription: sub})
		for _, t := range sub.Topics {
			if _, seen := partitions[t]; seen {
				continue
			}
			partitions[t] = 0
			if err := gc.c.meta.refresh(ctx, t); err != nil && ctx.Err() != nil {
				return nil, err
			}
			if n, err := gc.c.meta.numPartitions(ctx, t); err == nil {
				partitions[t] = int32(n)
			}
		}
	}
	// Missing topics stay in counts at 0, so that their creation is noticed.
	m.counts = maps.Clone(partitions)
	maps.DeleteFunc(partitions, func(_ string, n int32) bool { return n == 0 }) // unknown topics are not assigned
	result := asg.Assign(members, partitions)
	var out []*groupv1.SyncGroupAssignment
	for _, mem := range members {
		out = append(out, &groupv1.SyncGroupAssignment{MemberId: mem.ID, Assignment: result[mem.ID].Encode()})
	}
	return out, nil
}

// heartbeat keeps the member in the group until a rebalance is asked for
// (errRejoin) or ctx ends. Coordinator trouble is retried with backoff: the
// member stays in the group while its session lasts.
func (m *membership) heartbeat(ctx context.Context) error {
	o := m.gc.opts
	wait := o.HeartbeatInterval
	checked := time.Now()
	for attempt := 1; ; {
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
		if m.gc.pollExpired() {
			return errPollTimeout
		}
		if m.counts != nil && time.Since(checked) >= m.gc.c.opts.MetadataMaxAge {
			checked = time.Now()
			if m.partitionsChanged(ctx) {
				return errRejoin
			}
		}
		err := m.heartbeatOnce(ctx)
		switch code := kerr.CodeOf(err); {
		case err == nil:
			wait, attempt = o.HeartbeatInterval, 1
		case code == kerr.RebalanceInProgress:
			return errRejoin
		case m.resetOn(err):
			return errRejoin
		case m.fatal(err):
			return err
		default:
			m.gc.c.log.Debug("heartbeat failed", "group", o.GroupID, "err", err)
			wait = min(backoff(m.gc.c.opts.RetryBackoff, m.gc.c.opts.RetryBackoffMax, attempt), o.HeartbeatInterval)
			attempt++
		}
	}
}

// partitionsChanged reports, on the leader, whether the partition count of
// a topic the group subscribes to moved since the last assignment, a topic
// created (from 0) or deleted (to 0) included: Kafka's leader rejoins when
// the subscribed topics' metadata no longer matches its assignment, so
// that new partitions are read and a deleted topic's are let go. Before,
// only topics with partitions assigned were looked at. A refresh that
// fails tells nothing.
func (m *membership) partitionsChanged(ctx context.Context) bool {
	c := m.gc.c
	topics := slices.Sorted(maps.Keys(m.counts))
	if err := c.meta.refresh(ctx, topics...); err != nil {
		return false
	}
	for _, t := range topics {
		if now := c.meta.cachedCount(t); int32(now) != m.counts[t] {
			c.log.Info("partition count changed; rebalancing", "group", m.gc.opts.GroupID, "topic", t, "was", m.counts[t], "now", now)
			return true
		}
	}
	return false
}

// heartbeatOnce sends one heartbeat, finding the coordinator first if
// needed; it does not retry.
func (m *membership) heartbeatOnce(ctx context.Context) error {
	o := m.gc.opts
	err := m.gc.coord.attempt(ctx, min(o.RequestTimeout, o.SessionTimeout), func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		_, err := gs.Heartbeat(ctx, &groupv1.HeartbeatRequest{
			GroupId: o.GroupID, GenerationId: m.generation, MemberId: m.memberID, GroupInstanceId: o.InstanceID,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat (group %s): %w", o.GroupID, toKerr(err))
	}
	return nil
}

// minus is a without the partitions of b; both sorted.
func minus(a, b []TopicPartition) []TopicPartition {
	var out []TopicPartition
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

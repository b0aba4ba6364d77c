package client

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// The group admin calls: each goes to the group's coordinator (found with
// FindCoordinator, followed when it moves), as Kafka's admin client does.

// groupCoordinator returns a coordinator tracker for group.
func (c *Client) groupCoordinator(group string) (*coordinator, error) {
	if group == "" {
		return nil, kerr.BadField(kerr.InvalidGroupID, "group", "no group id given")
	}
	return &coordinator{c: c, group: group}, nil
}

// ListGroups lists the groups of every broker (each lists the groups it
// coordinates), sorted by id, filtered by state when states are given. The
// brokers are asked at once (at most listGroupsParallel at a time): one
// after the other, each frozen broker held the list for a whole request
// timeout and the brokers after it went unasked once the call's deadline
// passed. A broker that does not answer makes the list incomplete: the
// groups the others listed come back with a *ListGroupsError naming the
// brokers that did not (as Kafka's admin client reports
// listConsumerGroups' errors per broker).
func (c *Client) ListGroups(ctx context.Context, states ...string) ([]*groupv1.ListedGroup, error) {
	ctx, cancel := c.opts.withAPITimeout(ctx)
	defer cancel()
	if _, err := c.Metadata(ctx); err != nil {
		return nil, err
	}
	c.meta.mu.Lock()
	addrs := make(map[int32]string, len(c.meta.brokers))
	for id, a := range c.meta.brokers {
		addrs[id] = a
	}
	c.meta.mu.Unlock()
	ids := slices.Sorted(maps.Keys(addrs))
	answers := make([]*groupv1.ListGroupsResponse, len(ids))
	errs := make([]error, len(ids))
	slots := make(chan struct{}, listGroupsParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				errs[i] = toKerr(ctx.Err())
				return
			}
			errs[i] = c.groupCall(ctx, addrs[id], c.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
				var err error
				answers[i], err = gs.ListGroups(ctx, &groupv1.ListGroupsRequest{StatesFilter: states})
				return err
			})
		})
	}
	wg.Wait()
	var out []*groupv1.ListedGroup
	var lerr *ListGroupsError
	seen := map[string]bool{}
	for i, id := range ids {
		if errs[i] != nil {
			if lerr == nil {
				lerr = &ListGroupsError{}
			}
			ke := kerr.As(errs[i])
			lerr.Unanswered = append(lerr.Unanswered, &groupv1.ListGroupsBrokerError{
				BrokerId: id, Address: addrs[id], ErrorCode: commonv1.ErrorCode(ke.Code), Message: ke.Message})
			lerr.errs = append(lerr.errs, wrap(errs[i], "list groups on broker %d", id))
			continue
		}
		for _, g := range answers[i].GetGroups() {
			if !seen[g.GetGroupId()] { // a group moving may be listed twice
				seen[g.GetGroupId()] = true
				out = append(out, g)
			}
		}
	}
	slices.SortFunc(out, func(a, b *groupv1.ListedGroup) int { return cmp.Compare(a.GetGroupId(), b.GetGroupId()) })
	if lerr != nil {
		return out, lerr
	}
	return out, nil
}

// listGroupsParallel bounds the brokers ListGroups asks at once.
const listGroupsParallel = 8

// ListGroupsError is ListGroups' error when some brokers did not list
// their groups: each with its address and what it answered
// (REQUEST_TIMED_OUT for one that did not answer in time). The groups
// returned beside it are those of the other brokers.
type ListGroupsError struct {
	Unanswered []*groupv1.ListGroupsBrokerError
	errs       []error
}

func (e *ListGroupsError) Error() string { return errors.Join(e.errs...).Error() }

// Unwrap gives each broker's error, so errors.Is and kerr.CodeOf see them.
func (e *ListGroupsError) Unwrap() []error { return e.errs }

// DescribeGroup describes one group: state, protocol, generation and
// members with their assignments. An unknown group is Dead with no members.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*groupv1.DescribedGroup, error) {
	co, err := c.groupCoordinator(group)
	if err != nil {
		return nil, err
	}
	var out *groupv1.DescribedGroup
	err = co.call(ctx, "describe group", c.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		resp, err := gs.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{group}})
		if err != nil {
			return err
		}
		if len(resp.GetGroups()) != 1 {
			return kerr.New(kerr.UnknownServerError, "DescribeGroups answered %d groups for one", len(resp.GetGroups()))
		}
		out = resp.GetGroups()[0]
		if code := kerr.Code(out.GetErrorCode()); code != kerr.None {
			return kerr.New(code, "describe group %s", group)
		}
		return nil
	})
	return out, err
}

// GroupLag is the per-partition view of a group's progress (committed
// offset, high watermark, log end offset, lag, owner), for topics (all the
// group has when none are given).
func (c *Client) GroupLag(ctx context.Context, group string, topics ...string) (*groupv1.DescribeGroupLagResponse, error) {
	co, err := c.groupCoordinator(group)
	if err != nil {
		return nil, err
	}
	var out *groupv1.DescribeGroupLagResponse
	err = co.call(ctx, "describe group lag", c.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		var err error
		out, err = gs.DescribeGroupLag(ctx, &groupv1.DescribeGroupLagRequest{GroupId: group, Topics: topics})
		return err
	})
	return out, err
}

// ResetGroupOffsets moves a group's committed offsets (only while it has
// no members); with DryRun it only computes them.
func (c *Client) ResetGroupOffsets(ctx context.Context, req *groupv1.ResetGroupOffsetsRequest) (*groupv1.ResetGroupOffsetsResponse, error) {
	co, err := c.groupCoordinator(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	var out *groupv1.ResetGroupOffsetsResponse
	err = co.call(ctx, "reset group offsets", c.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		var err error
		out, err = gs.ResetGroupOffsets(ctx, req)
		return err
	})
	return out, err
}

// DeleteGroupOffsets deletes a group's committed offsets of partitions
// (any while the group is Empty; only of topics no member subscribes to
// otherwise). The error names the first partition refused.
func (c *Client) DeleteGroupOffsets(ctx context.Context, group string, partitions ...TopicPartition) error {
	co, err := c.groupCoordinator(group)
	if err != nil {
		return err
	}
	req := &groupv1.OffsetDeleteRequest{GroupId: group}
	for _, t := range groupTPs(partitions) {
		req.Topics = append(req.Topics, &groupv1.OffsetDeleteTopic{Name: t.Topic, Partitions: t.Partitions})
	}
	var resp *groupv1.OffsetDeleteResponse
	err = co.call(ctx, "delete group offsets", c.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		var err error
		resp, err = gs.OffsetDelete(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	// A partition's refusal is an answer, not a reason to retry.
	for _, t := range resp.GetTopics() {
		for _, p := range t.GetPartitions() {
			if code := kerr.Code(p.GetErrorCode()); code != kerr.None {
				return kerr.New(code, "delete offset of %s-%d (group %s)", t.GetName(), p.GetPartition(), group)
			}
		}
	}
	return nil
}

// GroupOffsets returns a group's committed offsets (all of them when no
// partitions are given).
func (c *Client) GroupOffsets(ctx context.Context, group string, partitions ...TopicPartition) (map[TopicPartition]int64, error) {
	co, err := c.groupCoordinator(group)
	if err != nil {
		return nil, err
	}
	gc := &GroupConsumer{c: c, coord: co, opts: GroupOptions{GroupID: group, RequestTimeout: c.opts.RequestTimeout}}
	return gc.committed(ctx, partitions, true)
}

// DeleteGroup deletes an empty group and its committed offsets
// (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND when unknown).
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	co, err := c.groupCoordinator(group)
	if err != nil {
		return err
	}
	return co.call(ctx, "delete group", c.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		resp, err := gs.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{group}})
		if err != nil {
			return err
		}
		for _, r := range resp.GetResults() {
			if code := kerr.Code(r.GetErrorCode()); code != kerr.None {
				return kerr.New(code, "delete group %s", r.GetGroupId())
			}
		}
		return nil
	})
}

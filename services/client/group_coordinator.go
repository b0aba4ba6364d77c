package client

import (
	"context"
	"sync"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// coordinator tracks the broker coordinating one group. Any broker answers
// FindCoordinator; the answer is kept until a call to it fails with a
// code that says the group moved (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE) or the broker cannot be reached.
type coordinator struct {
	c     *Client
	group string

	mu   sync.Mutex // guards addr and id
	addr string     // "" when unknown
	id   int32
}

// find returns the coordinator's address, asking the brokers when it is
// not known. One attempt per known broker; the caller retries.
func (co *coordinator) find(ctx context.Context) (string, error) {
	co.mu.Lock()
	addr := co.addr
	co.mu.Unlock()
	if addr != "" {
		return addr, nil
	}
	co.c.meta.mu.Lock()
	cands := co.c.meta.candidatesLocked()
	co.c.meta.mu.Unlock()
	var last error = kerr.New(kerr.CoordinatorNotAvailable, "no broker to ask")
	for _, a := range cands {
		var resp *groupv1.FindCoordinatorResponse
		err := co.c.groupCall(ctx, a, co.c.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
			var err error
			resp, err = gs.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: co.group, KeyType: groupv1.CoordinatorType_COORDINATOR_TYPE_GROUP})
			return err
		})
		if err == nil && resp.GetCoordinator().GetAddress() != "" {
			n := resp.GetCoordinator()
			co.set(n.GetId(), n.GetAddress())
			co.c.log.Debug("group coordinator", "group", co.group, "broker", n.GetId(), "addr", n.GetAddress())
			return n.GetAddress(), nil
		}
		if err == nil {
			err = kerr.New(kerr.CoordinatorNotAvailable, "FindCoordinator named no broker")
		}
		last = err
		if ctx.Err() != nil || !toKerr(err).Code.Retriable() {
			break
		}
	}
	return "", last
}

func (co *coordinator) set(id int32, addr string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.id, co.addr = id, addr
}

// current is the coordinator believed in, -1 and "" when none.
func (co *coordinator) current() (int32, string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.addr == "" {
		return -1, ""
	}
	return co.id, co.addr
}

// noteError forgets the coordinator at addr after an answer that says the
// group is elsewhere (following a NOT_COORDINATOR hint when there is one),
// or that the broker could not be reached.
func (co *coordinator) noteError(addr string, e *kerr.Error) {
	if e == nil {
		return
	}
	switch {
	case e.Code == kerr.NotCoordinator && e.Coordinator != nil && e.Coordinator.Address != "":
		co.set(e.Coordinator.ID, e.Coordinator.Address)
	case e.Code == kerr.NotCoordinator, e.Code == kerr.CoordinatorNotAvailable,
		e.Code == kerr.RequestTimedOut, e.Code.RefreshMetadata():
		co.mu.Lock()
		if co.addr == addr {
			co.addr = ""
		}
		co.mu.Unlock()
	}
}

// call runs fn against the coordinator, finding it first and again after
// answers that say it moved, retrying retriable answers with backoff until
// ctx ends (or the API timeout). timeout bounds one attempt.
func (co *coordinator) call(ctx context.Context, what string, timeout time.Duration, fn func(context.Context, groupv1.GroupServiceClient) error) error {
	ctx, cancel := co.c.opts.withAPITimeout(ctx)
	defer cancel()
	var last error
	for attempt := 1; ; attempt++ {
		err := co.attempt(ctx, timeout, fn)
		if err == nil {
			return nil
		}
		ke := toKerr(err)
		if ctx.Err() != nil {
			return ctxError(ctx, lastOr(last, ke), "%s (group %s)", what, co.group)
		}
		if !ke.Code.Retriable() {
			return wrap(ke, "%s (group %s)", what, co.group)
		}
		last = lastOr(last, ke)
		co.c.log.Debug("retrying", "call", what, "group", co.group, "attempt", attempt, "err", ke)
		if !sleep(ctx, backoff(co.c.opts.RetryBackoff, co.c.opts.RetryBackoffMax, attempt)) {
			return ctxError(ctx, last, "%s (group %s)", what, co.group)
		}
	}
}

// attempt is one try of call.
func (co *coordinator) attempt(ctx context.Context, timeout time.Duration, fn func(context.Context, groupv1.GroupServiceClient) error) error {
	addr, err := co.find(ctx)
	if err != nil {
		return err
	}
	err = co.c.groupCall(ctx, addr, timeout, fn)
	co.noteError(addr, toKerr(err))
	return err
}

// groupCall runs one attempt of fn against the GroupService at addr.
func (c *Client) groupCall(ctx context.Context, addr string, timeout time.Duration, fn func(context.Context, groupv1.GroupServiceClient) error) error {
	cc, err := c.pool.get(addr)
	if err != nil {
		return toKerr(err)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = fn(actx, groupv1.NewGroupServiceClient(cc))
	c.meta.noteAnswered(addr, ctx, actx, err)
	if err != nil {
		return toKerr(err)
	}
	return nil
}

package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// Admin talks to the controllers' AdminService. It finds the active
// controller among the addresses it was given, follows NOT_CONTROLLER
// answers to the controller they name, and retries retriable answers. It is
// safe for concurrent use.
//
// A controller that does not answer an attempt within RequestTimeout (plus
// the wait the request asks for) is passed over for a while: a stopped
// process keeps its connections open, so only a deadline tells it apart,
// and until the standby takes office the standby's NOT_CONTROLLER still
// names it. The call moves on to the other controllers, ignores hints to
// it, and lands on the new active controller once one is elected.
type Admin struct {
	opts  Options
	addrs []string
	pool  connPool

	mu     sync.Mutex           // guards active and silent
	active string               // the controller believed active; "" when unknown
	silent map[string]time.Time // controllers whose last attempt timed out, passed over until then
}

// NewAdmin returns an admin client for the controllers at addrs. It dials
// nothing until the first call.
func NewAdmin(controllerAddrs []string, opts Options) (*Admin, error) {
	addrs := slices.DeleteFunc(slices.Clone(controllerAddrs), func(a string) bool { return a == "" })
	if len(addrs) == 0 {
		return nil, kerr.BadField(kerr.InvalidConfig, "controllers", "no controller address given")
	}
	opts = opts.withDefaults()
	return &Admin{opts: opts, addrs: addrs, pool: newConnPool(opts), silent: map[string]time.Time{}}, nil
}

// Close closes the connections.
func (a *Admin) Close() error { return a.pool.close() }

// ActiveController is the address of the controller the last call reached.
func (a *Admin) ActiveController() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active
}

// search tracks the hunt for the active controller across the attempts
// of one call.
type search struct {
	next   int // the configured address to try when none is known active
	misses int // addresses tried in a row without learning anything
	hops   int // hints followed since the last pause
}

// target is the controller to try: the one believed active, else the next
// configured address that is not passed over (any, when all are).
func (a *Admin) target(s *search) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active != "" {
		return a.active
	}
	now := time.Now()
	for i := range a.addrs {
		addr := a.addrs[(s.next+i)%len(a.addrs)]
		if !a.silentLocked(addr, now) {
			s.next += i
			return addr
		}
	}
	return a.addrs[s.next%len(a.addrs)]
}

// setActive records the controller that answered (or "" for unknown).
func (a *Admin) setActive(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active = addr
	delete(a.silent, addr)
}

// passOver records that addr did not answer in time.
func (a *Admin) passOver(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active == addr {
		a.active = ""
	}
	a.silent[addr] = time.Now().Add(2 * a.opts.RequestTimeout)
}

func (a *Admin) silentLocked(addr string, now time.Time) bool {
	until, ok := a.silent[addr]
	if ok && !now.Before(until) {
		delete(a.silent, addr)
		return false
	}
	return ok
}

func (a *Admin) isSilent(addr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.silentLocked(addr, time.Now())
}

// redirect acts on a failed attempt at addr: it follows a NOT_CONTROLLER
// hint at once, moves to the next address when there is none (or the node
// is unreachable), and says whether to retry and whether to back off
// first: after a whole round of addresses, after several hints in a row,
// and after other retriable errors.
func (a *Admin) redirect(s *search, addr string, ke *kerr.Error, timedOut bool) (retry, pause bool) {
	if timedOut {
		a.passOver(addr)
		a.opts.Logger.Info("controller did not answer in time; trying another", "controller", addr, "timeout", a.opts.RequestTimeout)
	} else if ke.Code != kerr.NotController && ke.Code != kerr.NetworkException {
		// Narrower than the table's Reroute: a controller's other answers
		// (a partition's LEADER_NOT_AVAILABLE, say) are about the cluster,
		// not about this node, so another controller would say the same.
		// A topic the active controller does not know does not exist: its
		// answer is final, where waiting it out held a mistyped name's
		// answer for the whole API timeout.
		return ke.Code.Retriable() && ke.Code != kerr.UnknownTopicOrPartition, true
	}
	if h := ke.Controller; !timedOut && h != nil && h.Address != "" && h.Address != addr && !a.isSilent(h.Address) {
		a.setActive(h.Address)
		a.opts.Logger.Debug("following controller hint", "from", addr, "to", h.Address)
		s.hops++
		if s.hops > len(a.addrs) {
			s.hops = 0
			return true, true
		}
		return true, false
	}
	if !timedOut {
		a.setActive("")
	}
	s.next++
	s.misses++
	if s.misses >= len(a.addrs) {
		s.misses = 0
		return true, true
	}
	return true, false
}

// call runs fn against the active controller until it succeeds, fails with
// a code that is not retriable, or ctx ends (the API timeout without a
// deadline). Each attempt may take RequestTimeout plus wait, the time the
// request asks the controller to wait (its timeout_ms).
func (a *Admin) call(ctx context.Context, what string, wait time.Duration, fn func(context.Context, adminv1.AdminServiceClient) error) error {
	ctx, cancel := a.opts.withAPITimeout(ctx)
	defer cancel()
	var (
		s       search
		last    error
		retries int
	)
	for {
		addr := a.target(&s)
		timedOut, err := a.attempt(ctx, addr, wait, fn)
		if err == nil {
			a.setActive(addr)
			return nil
		}
		ke := toKerr(err)
		if ctx.Err() != nil {
			return ctxError(ctx, lastOr(last, ke), "%s", what)
		}
		last = lastOr(last, ke)
		retry, pause := a.redirect(&s, addr, ke, timedOut)
		if !retry {
			return wrap(ke, "%s", what)
		}
		if !pause {
			continue
		}
		retries++
		if !sleep(ctx, backoff(a.opts.RetryBackoff, a.opts.RetryBackoffMax, retries)) {
			return ctxError(ctx, last, "%s", what)
		}
	}
}

// attempt calls fn on addr; timedOut reports that the attempt's own
// deadline ended it.
func (a *Admin) attempt(ctx context.Context, addr string, wait time.Duration, fn func(context.Context, adminv1.AdminServiceClient) error) (timedOut bool, err error) {
	cc, err := a.pool.get(addr)
	if err != nil {
		return false, err
	}
	actx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout+wait)
	defer cancel()
	err = fn(actx, adminv1.NewAdminServiceClient(cc))
	return err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil, err
}

// unary adapts one AdminService method to call.
func unary[Req, Resp any](a *Admin, ctx context.Context, what string, req Req,
	m func(adminv1.AdminServiceClient, context.Context, Req) (Resp, error)) (Resp, error) {
	var wait time.Duration
	if w, ok := any(req).(interface{ GetTimeoutMs() int32 }); ok {
		wait = time.Duration(max(w.GetTimeoutMs(), 0)) * time.Millisecond
	}
	var resp Resp
	err := a.call(ctx, what, wait, func(ctx context.Context, ac adminv1.AdminServiceClient) error {
		var err error
		resp, err = m(ac, ctx, req)
		return err
	})
	return resp, err
}

// CreateTopics creates topics; per-topic errors are in the results (see
// CreateTopic and ItemError).
func (a *Admin) CreateTopics(ctx context.Context, req *adminv1.CreateTopicsRequest) (*adminv1.CreateTopicsResponse, error) {
	return unary(a, ctx, "create topics", req, callOpts(adminv1.AdminServiceClient.CreateTopics))
}

// DeleteTopics deletes topics; per-topic errors are in the results.
func (a *Admin) DeleteTopics(ctx context.Context, req *adminv1.DeleteTopicsRequest) (*adminv1.DeleteTopicsResponse, error) {
	return unary(a, ctx, "delete topics", req, callOpts(adminv1.AdminServiceClient.DeleteTopics))
}

// DescribeTopics lists topics, optionally only the partitions matching the
// request's health filters.
func (a *Admin) DescribeTopics(ctx context.Context, req *adminv1.DescribeTopicsRequest) (*adminv1.DescribeTopicsResponse, error) {
	return unary(a, ctx, "describe topics", req, callOpts(adminv1.AdminServiceClient.DescribeTopics))
}

// DescribeCluster names the brokers, the controllers and the active one.
func (a *Admin) DescribeCluster(ctx context.Context) (*adminv1.DescribeClusterResponse, error) {
	return unary(a, ctx, "describe cluster", &adminv1.DescribeClusterRequest{}, callOpts(adminv1.AdminServiceClient.DescribeCluster))
}

// DescribeConfigs returns the effective configs of topics or brokers.
func (a *Admin) DescribeConfigs(ctx context.Context, req *adminv1.DescribeConfigsRequest) (*adminv1.DescribeConfigsResponse, error) {
	return unary(a, ctx, "describe configs", req, callOpts(adminv1.AdminServiceClient.DescribeConfigs))
}

// AlterConfigs sets or deletes topic and broker configs.
func (a *Admin) AlterConfigs(ctx context.Context, req *adminv1.AlterConfigsRequest) (*adminv1.AlterConfigsResponse, error) {
	return unary(a, ctx, "alter configs", req, callOpts(adminv1.AdminServiceClient.AlterConfigs))
}

// DescribeUserScramCredentials lists users' SCRAM mechanisms and
// iterations.
func (a *Admin) DescribeUserScramCredentials(ctx context.Context, req *adminv1.DescribeUserScramCredentialsRequest) (*adminv1.DescribeUserScramCredentialsResponse, error) {
	return unary(a, ctx, "describe user SCRAM credentials", req, callOpts(adminv1.AdminServiceClient.DescribeUserScramCredentials))
}

// DescribeClientQuotas lists the client quota entities a filter matches.
func (a *Admin) DescribeClientQuotas(ctx context.Context, req *adminv1.DescribeClientQuotasRequest) (*adminv1.DescribeClientQuotasResponse, error) {
	return unary(a, ctx, "describe client quotas", req, callOpts(adminv1.AdminServiceClient.DescribeClientQuotas))
}

// AlterClientQuotas sets and removes client quota entities' keys.
func (a *Admin) AlterClientQuotas(ctx context.Context, req *adminv1.AlterClientQuotasRequest) (*adminv1.AlterClientQuotasResponse, error) {
	return unary(a, ctx, "alter client quotas", req, callOpts(adminv1.AdminServiceClient.AlterClientQuotas))
}

// AlterUserScramCredentials sets or deletes users' SCRAM credentials.
func (a *Admin) AlterUserScramCredentials(ctx context.Context, req *adminv1.AlterUserScramCredentialsRequest) (*adminv1.AlterUserScramCredentialsResponse, error) {
	return unary(a, ctx, "alter user SCRAM credentials", req, callOpts(adminv1.AdminServiceClient.AlterUserScramCredentials))
}

// ElectLeaders runs a preferred or unclean election (KIP-460).
func (a *Admin) ElectLeaders(ctx context.Context, req *adminv1.ElectLeadersRequest) (*adminv1.ElectLeadersResponse, error) {
	return unary(a, ctx, "elect leaders", req, callOpts(adminv1.AdminServiceClient.ElectLeaders))
}

// callOpts drops the variadic call options from a generated method value.
func callOpts[Req, Resp any](m func(adminv1.AdminServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) func(adminv1.AdminServiceClient, context.Context, Req) (Resp, error) {
	return func(c adminv1.AdminServiceClient, ctx context.Context, r Req) (Resp, error) { return m(c, ctx, r) }
}

// CreateTopic creates one topic and returns its per-topic error, if any, as
// a *kerr.Error (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...).
func (a *Admin) CreateTopic(ctx context.Context, spec *adminv1.TopicSpec) (*adminv1.CreateTopicResult, error) {
	resp, err := a.CreateTopics(ctx, &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{spec}})
	if err != nil {
		return nil, err
	}
	for _, r := range resp.GetResults() {
		if r.GetName() == spec.GetName() {
			return r, ItemError(r.GetErrorCode(), r.GetErrorMessage(), "create topic %s", r.GetName())
		}
	}
	return nil, kerr.New(kerr.UnknownServerError, "create topic %s: no result in the answer", spec.GetName())
}

// DeleteTopic deletes one topic and returns its per-topic error, if any.
func (a *Admin) DeleteTopic(ctx context.Context, name string) error {
	resp, err := a.DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{name}})
	if err != nil {
		return err
	}
	for _, r := range resp.GetResults() {
		if r.GetName() == name {
			return ItemError(r.GetErrorCode(), r.GetErrorMessage(), "delete topic %s", name)
		}
	}
	return kerr.New(kerr.UnknownServerError, "delete topic %s: no result in the answer", name)
}

// ItemError turns the error code of one item of a batched answer into a
// *kerr.Error (wrapped with what), or nil for none.
func ItemError(code commonv1.ErrorCode, msg, what string, args ...any) error {
	if code == commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(what, args...), &kerr.Error{Code: kerr.Code(code), Message: msg})
}

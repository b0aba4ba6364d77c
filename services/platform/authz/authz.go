// Package authz decides who may call what on a tidemark server: the roles a
// certificate proves (a controller may send control requests as itself, a
// broker may fetch and report as itself) and, for everything users do, an
// ACL file in Kafka's principal/operation/resource shape.
//
// Every gRPC method of every tidemark service has exactly one policy
// (policies.go); a method without one is refused, and Covers makes a server
// with such a method fail to start. Authorization is on exactly when TLS is:
// over plaintext no caller can be identified, so every call passes and the
// server says so once at start.
package authz

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/paging"
)

// Config is what an operator sets: the ACL file and the super users.
type Config struct {
	// ACLFile holds the ACL rules; empty means none (only super users and
	// the cluster's own roles pass).
	ACLFile string
	// SuperUsers bypass ACLs (not the role checks: a super user is still
	// not broker 2). Kafka's form, User:NAME.
	SuperUsers []string
}

// DefaultConfig has User:admin as the one super user.
func DefaultConfig() Config { return Config{SuperUsers: []string{"User:admin"}} }

// AddFlags registers --acl.file and --super.users.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ACLFile, "acl.file", c.ACLFile, "ACL file (lines like 'allow User:alice Write Topic:orders-*'); read again when it changes")
	fs.Func("super.users", "principals that bypass ACLs, separated by ';' or ',' (default User:admin)", func(s string) error {
		c.SuperUsers = nil
		for _, u := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
			if u = strings.TrimSpace(u); u != "" {
				c.SuperUsers = append(c.SuperUsers, u)
			}
		}
		return nil
	})
}

// Validate names the first setting that cannot work.
func (c Config) Validate() error {
	for _, u := range c.SuperUsers {
		if name, ok := strings.CutPrefix(u, "User:"); !ok || name == "" || strings.Contains(name, "*") {
			return config.Invalid("super.users", u, "want User:NAME")
		}
	}
	return nil
}

// Options build an Authorizer.
type Options struct {
	Config
	// TLS: callers are identified by their certificates and authorization
	// is on. There is no other way to turn it on or off.
	TLS bool
	// FaultInjection: the broker serves the fault-injection API.
	FaultInjection bool
	// ReloadEvery is how often the ACL file is looked at, at most (1s).
	ReloadEvery time.Duration
	Logger      *slog.Logger
	// Registry, when set, gets tidemark_authz_denied_total.
	Registry prometheus.Registerer
	// StoredBindings: ACL bindings kept in etcd are in force besides the
	// file's, given by SetStored. Until the first SetStored a user's
	// request waits for it, up to storedWait after the authorizer was made
	// and not beyond, then it is refused (super users do not wait): a deny
	// kept there must not be missed while they load, as Kafka's authorizer
	// loads its ACLs before the broker serves.
	StoredBindings bool
	// StoredWait is how long after New a request may wait for the stored
	// bindings' first load (5 s when 0).
	StoredWait time.Duration
}

// Authorizer is one server's authorization.
type Authorizer struct {
	opts  Options
	log   *slog.Logger
	super map[string]bool
	acls  *aclFile // nil without an ACL file
	// stored are the bindings kept in etcd (SetStored); in force together
	// with the file's rules.
	stored atomic.Pointer[ACL]
	// storedPending: StoredBindings and no SetStored yet; storedLoaded is
	// closed by the first SetStored.
	storedPending atomic.Bool
	storedLoaded  chan struct{}
	// The first load is waited for until storedSince+storedWait, one
	// deadline for every request: a request deciding many names (a
	// Metadata naming a hundred topics) or one coming once etcd has been
	// out of reach for a while is then refused at once, never held up to
	// storedWait per name.
	storedSince time.Time
	storedWait  time.Duration
	denied      *prometheus.CounterVec
	logged      *denialLog
}

// New reads the ACL file (an error names its bad line) and, over
// plaintext, logs the one warning that nothing is authorized.
func New(o Options) (*Authorizer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ReloadEvery <= 0 {
		o.ReloadEvery = time.Second
	}
	a := &Authorizer{opts: o, log: logging.OrDiscard(o.Logger), super: map[string]bool{}, logged: newDenialLog(10 * time.Second)}
	a.storedPending.Store(o.StoredBindings)
	a.storedLoaded, a.storedSince, a.storedWait = make(chan struct{}), time.Now(), o.StoredWait
	if a.storedWait <= 0 {
		a.storedWait = 5 * time.Second
	}
	for _, u := range o.SuperUsers {
		a.super[u] = true
	}
	if o.ACLFile != "" {
		f, err := loadACLFile(o.ACLFile, o.ReloadEvery, a.log)
		if err != nil {
			return nil, err
		}
		a.acls = f
	}
	a.denied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidemark_authz_denied_total",
		Help: "Calls refused by authorization, by gRPC method and the caller's role.",
	}, []string{"method", "principal_role"})
	if o.Registry != nil {
		if err := o.Registry.Register(a.denied); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			a.denied = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	if !o.TLS {
		a.log.Warn("authorization is OFF: plaintext listener, every caller is anonymous and may call every RPC (control, replication, admin); use TLS for anything but development")
	} else {
		rules := 0
		if a.acls != nil {
			rules = len(a.acls.current().Rules)
		}
		a.log.Info("authorization on", "acl_file", o.ACLFile, "acl_rules", rules, "super_users", strings.Join(o.SuperUsers, ";"))
	}
	return a, nil
}

// Enabled reports whether calls are checked (TLS is on).
func (a *Authorizer) Enabled() bool { return a.opts.TLS }

func (a *Authorizer) acl() *ACL {
	if a.acls == nil {
		return nil
	}
	return a.acls.current()
}

// ruleSets are the rules in force: the file's and the stored bindings.
func (a *Authorizer) ruleSets() []*ACL { return []*ACL{a.acl(), a.stored.Load()} }

// SetStored replaces the bindings kept in etcd that are in force besides
// the ACL file's rules.
func (a *Authorizer) SetStored(acl *ACL) {
	if a != nil {
		a.stored.Store(acl)
		if a.storedPending.CompareAndSwap(true, false) {
			close(a.storedLoaded)
		}
	}
}

// awaitStored reports whether the stored bindings are in force, waiting
// for their first load when they are not yet, until storedSince+storedWait
// at most.
func (a *Authorizer) awaitStored() bool {
	if !a.storedPending.Load() {
		return true
	}
	left := time.Until(a.storedSince.Add(a.storedWait))
	if left <= 0 {
		return !a.storedPending.Load()
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-a.storedLoaded:
		return true
	case <-t.C:
		return !a.storedPending.Load()
	}
}

type hostKey struct{}

// WithClientHost records the address a non-gRPC caller (a Kafka
// connection) comes from, for rules that name a host.
func WithClientHost(ctx context.Context, host string) context.Context {
	return context.WithValue(ctx, hostKey{}, host)
}

// ClientHost is the caller's IP, for a forwarder to pass on (ForwardFrom).
func ClientHost(ctx context.Context) string { return clientHost(ctx) }

// clientHost is the caller's IP: recorded, else the one a forwarding broker
// named, else the gRPC peer's; "" when unknown (a forwarder that named
// none).
func clientHost(ctx context.Context) string {
	if h, ok := ctx.Value(hostKey{}).(string); ok {
		return h
	}
	if identity.FromContext(ctx).Via != "" {
		return identity.ForwardedHost(ctx)
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if h, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			return h
		}
	}
	return ""
}

func (a *Authorizer) isSuper(p identity.Principal) bool {
	return p.Role != identity.Anonymous && a.super[p.String()]
}

// Covers fails when a registered method has no policy: a new RPC must be
// given one before the server starts.
func Covers(services map[string]grpc.ServiceInfo) error {
	var missing []string
	for name, svc := range services {
		for _, m := range svc.Methods {
			full := "/" + name + "/" + m.Name
			if _, ok := policies[full]; !ok && !isOpen(full) {
				missing = append(missing, full)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("authz: no policy for %s", strings.Join(missing, ", "))
	}
	return nil
}

// Authorize decides one message of method for the caller in ctx (req nil:
// the opening of a stream). It returns the decided principal.
func (a *Authorizer) Authorize(ctx context.Context, method string, req any) (identity.Principal, error) {
	p := identity.FromContext(ctx)
	if !a.opts.TLS || isOpen(method) {
		return p, nil
	}
	if p.Role == identity.Anonymous {
		return p, a.deny(method, p, kerr.New(kerr.SaslAuthenticationFailed, "not authenticated: %s needs a client certificate signed by the cluster's CA", method))
	}
	pol, ok := policies[method]
	if !ok {
		return p, a.deny(method, p, kerr.New(kerr.ClusterAuthorizationFailed, "%s may not call %s: the method has no authorization policy", p, method))
	}
	if err := pol.check(decider{a: a, p: p, host: clientHost(ctx)}, req); err != nil {
		return p, a.deny(method, p, err)
	}
	return p, nil
}

// Shown gives the pages of a list served under ctx (req of method, by the
// principal in ctx, already authorized) the names that principal may see
// (paging.WithVisible), as Unary does for gRPC calls: other front doors
// list exactly as much. An error refuses the list: which names it may see
// cannot be decided yet (the stored ACL bindings have not loaded).
func (a *Authorizer) Shown(ctx context.Context, method string, req any) (context.Context, error) {
	if a == nil || !a.opts.TLS {
		return ctx, nil
	}
	pol, ok := policies[method]
	if !ok || pol.shown == nil {
		return ctx, nil
	}
	p := identity.FromContext(ctx)
	shown, err := pol.shown(decider{a: a, p: p, host: clientHost(ctx)}, req)
	if err != nil {
		return ctx, a.deny(method, p, err)
	}
	if shown != nil {
		ctx = paging.WithVisible(ctx, shown)
	}
	return ctx, nil
}

// Filter trims resp, the answer to req of method for the principal in ctx,
// as Unary does for gRPC answers: other front doors show exactly as much.
func (a *Authorizer) Filter(ctx context.Context, method string, req, resp any) any {
	if a == nil || !a.opts.TLS {
		return resp
	}
	if pol, ok := policies[method]; ok && pol.filter != nil {
		return pol.filter(decider{a: a, p: identity.FromContext(ctx), host: clientHost(ctx)}, req, resp)
	}
	return resp
}

// Allowed reports whether the principal in ctx may do op on res, for
// answers that Kafka decides per resource (a Metadata request's topics):
// always when authorization is off (a nil Authorizer, or plaintext).
func (a *Authorizer) Allowed(ctx context.Context, op Operation, res Resource) bool {
	if a == nil || !a.opts.TLS {
		return true
	}
	p := identity.FromContext(ctx)
	if p.Role == identity.Anonymous {
		return false
	}
	return decider{a: a, p: p, host: clientHost(ctx)}.allowed(op, res)
}

func (a *Authorizer) deny(method string, p identity.Principal, err error) error {
	a.denied.WithLabelValues(method, p.Role.String()).Inc()
	if n, ok := a.logged.should(p.String() + " " + method); ok {
		a.log.Info("call refused by authorization", "principal", p.Describe(), "method", method, "err", err.Error(), "suppressed_since_last", n)
	}
	return err
}

// Unary is the unary interceptor: it decides the request, stores the
// principal in the context, and trims answers a policy filters. Refusals
// leave it as gRPC statuses already, so it works on a server without
// grpcserver's error mapping (the dev cluster's control API).
func (a *Authorizer) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		p, err := a.Authorize(ctx, info.FullMethod, req)
		if err != nil {
			return nil, kerr.ToStatus(err).Err()
		}
		ctx = identity.With(ctx, p)
		ctx, err = a.Shown(ctx, info.FullMethod, req)
		if err != nil {
			return nil, kerr.ToStatus(err).Err()
		}
		resp, err := h(ctx, req)
		if err == nil && a.opts.TLS {
			if pol, ok := policies[info.FullMethod]; ok && pol.filter != nil {
				resp = pol.filter(decider{a: a, p: p, host: clientHost(ctx)}, req, resp)
			}
		}
		return resp, err
	}
}

// Stream is the stream interceptor: it decides the opening, then every
// message received. A refused message ends the stream with the refusal,
// whatever the handler makes of the failed receive.
func (a *Authorizer) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		p, err := a.Authorize(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return kerr.ToStatus(err).Err()
		}
		// The caller's host is the same for every message of the stream:
		// found once, not per message (it formats the peer's address).
		ctx := identity.With(ss.Context(), p)
		ctx = WithClientHost(ctx, clientHost(ctx))
		s := &checkedStream{ServerStream: ss, ctx: ctx, a: a, method: info.FullMethod}
		err = h(srv, s)
		if refused := s.refusal(); refused != nil {
			return kerr.ToStatus(refused).Err()
		}
		return err
	}
}

type checkedStream struct {
	grpc.ServerStream
	ctx    context.Context
	a      *Authorizer
	method string

	mu      sync.Mutex
	refused error
}

func (s *checkedStream) Context() context.Context { return s.ctx }

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.refusal(); err != nil {
		return err
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if _, err := s.a.Authorize(s.ctx, s.method, m); err != nil {
		s.mu.Lock()
		s.refused = err
		s.mu.Unlock()
		return err
	}
	return nil
}

func (s *checkedStream) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// denialLog rate-limits denial logs: one line per principal and method
// per interval, with the count of those left out.
type denialLog struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]*denialEntry
}

type denialEntry struct {
	at         time.Time
	suppressed int
}

func newDenialLog(every time.Duration) *denialLog {
	return &denialLog{every: every, last: map[string]*denialEntry{}}
}

func (l *denialLog) should(key string) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	e := l.last[key]
	if e != nil && now.Sub(e.at) < l.every {
		e.suppressed++
		return 0, false
	}
	if e == nil {
		if len(l.last) >= 4096 { // a caller cycling names cannot grow this without bound
			clear(l.last)
		}
		e = &denialEntry{}
		l.last[key] = e
	}
	n := e.suppressed
	e.at, e.suppressed = now, 0
	return n, true
}

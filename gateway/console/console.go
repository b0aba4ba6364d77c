// Package console is tidemark's web console: a live picture of the cluster
// (brokers, the active controller, every partition's replicas with their log
// end offsets and high watermarks, the ISR, health badges and a timeline of
// replication events) and, when enabled, buttons that break and repair it.
//
// The page is static HTML, CSS and JavaScript modules embedded in the binary
// (no build step). It draws with SVG and follows the cluster through
// Server-Sent Events fed by AdminService.WatchCluster. The picture is built
// here, through tidemark.io/services/client and, for the process states and
// injected faults, the two demonstration-only services the client does not
// cover: a broker's FaultInjectionService and the dev launcher's
// DevClusterService.
//
// The buttons act through the gateway's public REST API under /v1, as any
// REST caller does, with the page's login cookie: produce, configs:alter,
// elect-leaders, /v1/brokers/{id}/faults and the dev launcher's
// /v1/dev/nodes and /v1/dev/scenarios. The gateway tells the console what
// its demonstration routes did (Refresh, FollowRun), so that every page
// shows a node action at once and a scenario's run as it goes.
//
// Paths served by the handler, all views:
//
//	GET  /                       the page
//	GET  /console/static/...     its scripts, styles and icon
//	GET  /console/events         Server-Sent Events: hello, status, snapshot, patch, events, scenario, ping
//	GET  /console/api/config     what the console offers (actions, node actions, Jaeger)
//	GET  /console/api/state      the latest snapshot as JSON
//	GET  /console/api/groups     the consumer groups: state, members, assignments, lag (groups.go)
//	GET  /console/api/scenarios  the dev launcher's scenarios and the last run followed (scenarios.go)
//
// Errors are the REST API's JSON body (resterr.Body: code, name, message,
// field, retriable, leader/controller hints): the Kafka error code and name
// from the ErrorDetail when the cluster refused, at the kerr table's HTTP
// status; the dev launcher's as resterr.Launcher names them.
//
// # Mounting
//
// The handler owns "/" and the "/console/" tree; mount it at "/" beside the
// REST API, whose more specific patterns win:
//
//	c, err := console.New(console.Options{Controllers: ..., EnableActions: ...})
//	mux.Handle("/", c)
//	srv.RegisterOnShutdown(func() { _ = c.Close() }) // ends the event streams
//
// Event streams never go idle, so call Close before (or as part of)
// http.Server.Shutdown, or Shutdown waits for its deadline. The server must
// not set a WriteTimeout shorter than the life of a page.
package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// Options configures a Console.
type Options struct {
	// Admin reaches the controllers. When nil, one is made from Controllers
	// (and closed by Close).
	Admin       *client.Admin
	Controllers []string

	// Client reaches the brokers (the Groups view). When nil, one is made
	// from Brokers, or, when Brokers is empty too, from the live brokers of
	// the latest snapshot on first use (and closed by Close).
	Client  *client.Client
	Brokers []string

	// ClientOptions are used for the Admin and Client the console makes
	// itself (tracing, timeouts, TLS); their DialOptions also serve the
	// connections to the fault-injection and dev launcher services.
	ClientOptions client.Options

	// DevControl is the address of a DevClusterService (the dev launcher
	// of `tidemark dev up` serves one on 127.0.0.1:9299). Empty: no stop,
	// kill, restart, pause or resume of brokers, and no scenarios.
	DevControl string

	// EnableActions turns on the buttons (produce, topic configs,
	// elections, fetch faults, node actions, scenarios), which call the
	// REST API under /v1. Off, the page only watches (and the gateway
	// refuses its demonstration routes with 403).
	EnableActions bool

	// JaegerUI is the base URL of a Jaeger UI (e.g. http://127.0.0.1:16686);
	// events that carry a trace id link to <JaegerUI>/trace/<id>. Empty: no
	// links.
	JaegerUI string

	// Streams, when set, takes a place for each page's event stream, held
	// while ctx (the request's) lives, or refuses it with the error the
	// request is answered with. The gateway passes its REST stream slots,
	// so that its limits and tidemark_gateway_streams_open count the pages
	// too; the console's own bounds (16 per user, 256 in all) apply as well.
	Streams func(ctx context.Context, what string) error

	// WatchInterval is how often the controller sends a snapshot without
	// changes (default 1s); StaleAfter is how long without one before the
	// page says the cluster is unreachable (default 3s).
	WatchInterval time.Duration
	StaleAfter    time.Duration

	// Heartbeat is how often an event stream sends a ping (default 15s):
	// it keeps the connection open through proxies, and tells the page its
	// stream still lives (a page that hears nothing for three heartbeats
	// drops the stream and opens a new one).
	Heartbeat time.Duration

	Logger *slog.Logger
}

// Console serves the web console. It is an http.Handler.
type Console struct {
	opts   Options
	log    *slog.Logger
	admin  *client.Admin
	mux    *http.ServeMux
	hub    *hub
	conns  *connSet
	scen   scenarios
	owned  []func() error // clients made here, closed by Close
	jaeger string

	mu          sync.Mutex // guards cl, userClients, closed
	cl          *client.Client
	userClients map[string]*client.Client // a REST user's (see clientForLocked)
	closed      bool
}

// New checks the options and returns a console. It dials nothing: the
// cluster is watched while at least one page is open.
func New(o Options) (*Console, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = time.Second
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 3 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	c := &Console{opts: o, log: log, conns: newConnSet(o.ClientOptions.DialOptions...),
		userClients: map[string]*client.Client{}}
	if o.JaegerUI != "" {
		u, err := url.Parse(o.JaegerUI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, kerr.BadField(kerr.InvalidConfig, "console.jaeger.ui", "%q is not an http(s) URL", o.JaegerUI)
		}
		c.jaeger = strings.TrimRight(o.JaegerUI, "/")
	}
	if o.DevControl != "" && !strings.Contains(o.DevControl, ":") {
		return nil, kerr.BadField(kerr.InvalidConfig, "console.dev.control", "%q must be host:port", o.DevControl)
	}
	c.admin = o.Admin
	if c.admin == nil {
		a, err := client.NewAdmin(o.Controllers, o.ClientOptions)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		c.admin = a
		c.owned = append(c.owned, a.Close)
	}
	c.cl = o.Client
	if c.cl == nil && len(o.Brokers) > 0 {
		cl, err := client.New(o.Brokers, o.ClientOptions)
		if err != nil {
			c.closeOwned()
			return nil, fmt.Errorf("console: %w", err)
		}
		c.cl = cl
		c.owned = append(c.owned, cl.Close)
	}
	c.hub = newHub(c)
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.servePage)
	m.HandleFunc("GET /index.html", c.servePage)
	m.Handle("GET /console/static/", http.StripPrefix("/console/static/", staticHandler()))
	m.HandleFunc("GET /favicon.ico", serveFavicon)
	m.HandleFunc("GET /favicon.svg", serveFavicon)
	m.HandleFunc("GET /console/events", c.viewer(c.serveEvents))
	m.HandleFunc("GET /console/api/config", c.serveConfig)
	m.HandleFunc("GET /console/api/state", c.viewer(c.serveState))
	m.HandleFunc("GET /console/api/groups", c.viewer(c.serveGroups))
	m.HandleFunc("GET /console/api/scenarios", c.viewer(c.serveScenarios))

	m.HandleFunc("/console/api/", func(w http.ResponseWriter, r *http.Request) {
		writeRefusal(w, http.StatusNotFound, kerr.New(kerr.InvalidRequest, "no console API at %s %s", r.Method, r.URL.Path))
	})
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeRefusal(w, http.StatusNotFound, kerr.New(kerr.InvalidRequest, "nothing at %s %s (the console is at GET /)", r.Method, r.URL.Path))
	})
	c.mux = m
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// Close ends every event stream, stops watching and closes the clients
// the console made. Call it before shutting the HTTP server down (event
// streams never go idle by themselves), e.g. with
// http.Server.RegisterOnShutdown.
func (c *Console) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.hub.close()
	c.conns.close()
	return c.closeOwned()
}

func (c *Console) closeOwned() error {
	var errs []error
	for _, f := range slices.Backward(c.owned) {
		errs = append(errs, f())
	}
	c.owned = nil
	return errors.Join(errs...)
}

// features is what the page may offer; the hello event and
// /console/api/config carry it.
type features struct {
	Actions     bool `json:"actions"`
	NodeActions bool `json:"nodeActions"`
	// Scenarios: the page may start the dev launcher's scenarios.
	Scenarios  bool   `json:"scenarios"`
	DevControl string `json:"devControl,omitempty"`
	JaegerUI   string `json:"jaegerUI,omitempty"`
	StaleAfter int64  `json:"staleAfterMs"`
	// Heartbeat: the stream sends something at least this often.
	Heartbeat int64 `json:"heartbeatMs"`
}

func (c *Console) features() features {
	f := features{Actions: c.opts.EnableActions, JaegerUI: c.jaeger, StaleAfter: c.opts.StaleAfter.Milliseconds(),
		Heartbeat: c.opts.Heartbeat.Milliseconds()}
	if c.opts.EnableActions && c.opts.DevControl != "" {
		f.NodeActions, f.Scenarios, f.DevControl = true, true, c.opts.DevControl
	}
	return f
}

func (c *Console) serveConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, c.features())
}

// viewerTimeout bounds the check of a viewer's rights.
const viewerTimeout = 5 * time.Second

// viewer checks, before a page's user sees the cluster, that the services
// let that user describe it: the view is one watch made by the gateway
// itself and shared by every page, so it is the user's own DescribeCluster
// (forwarded, as every call with the request's context) that says whether
// the user may see it. Only a refusal refuses: an unreachable cluster is
// what the view shows. Without authentication (no user) there is nothing
// to check.
func (c *Console) viewer(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := restauth.UserFrom(r.Context()); ok {
			ctx, cancel := context.WithTimeout(r.Context(), viewerTimeout)
			_, err := c.admin.DescribeCluster(ctx)
			cancel()
			if code := kerr.CodeOf(err); code == kerr.ClusterAuthorizationFailed ||
				code == kerr.TopicAuthorizationFailed || code == kerr.SaslAuthenticationFailed {
				ae := toAPIError(err)
				writeError(w, ae.status, ae.body)
				return
			}
		}
		next(w, r)
	}
}

// serveState answers the latest snapshot (watching for a moment first when
// no page is open).
func (c *Console) serveState(w http.ResponseWriter, r *http.Request) {
	s := c.hub.subscribe()
	defer c.hub.unsubscribe(s)
	ctx, cancel := context.WithTimeout(r.Context(), c.opts.StaleAfter)
	defer cancel()
	snap, st := c.hub.waitSnapshot(ctx)
	if snap == nil {
		writeRefusal(w, http.StatusServiceUnavailable, kerr.New(kerr.NetworkException, "%s", st.Message))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Status   statusView `json:"status"`
		Snapshot *snapshot  `json:"snapshot"`
	}{st, snap})
}

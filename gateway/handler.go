package gateway

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/services/platform/kerr"
)

// newHTTPHandler lays out the gateway's HTTP side: the REST API under /v1
// (bodies limited, each write of an answer bounded in time), login and logout, the OpenAPI document, /healthz, and /
// for the console. Every request passes the guard (Host, Origin, JSON
// writes) first; the REST API (which the console's buttons call too) and
// the console's data (events, state, groups, scenarios) then need an
// authenticated caller when authentication is on,
// while the page, its assets, the OpenAPI document and /healthz stay open.
// With tracing on (tp != nil) requests join the caller's W3C trace, which
// the upstream gRPC calls carry on.
func newHTTPHandler(api http.Handler, consoleUI http.Handler, maxBody int64, authn *restauth.Authenticator,
	hosts *hostSet, tp trace.TracerProvider, metrics *httpMetrics, log *slog.Logger) http.Handler {
	root := http.NewServeMux()
	// Each write of a REST answer is bounded in time (boundWrites): a
	// stream whose caller stopped reading held its slot for ever.
	root.Handle("/v1/", authn.Protect(limitBody(maxBody, boundWrites(api))))
	// Login and logout are routed beside /v1/: their bodies are bounded
	// in time like every other (limitBody), or a login whose body never
	// came held its goroutine and a graceful stop for ever.
	root.Handle("POST /v1/login", limitBody(maxBody, http.HandlerFunc(authn.Login)))
	root.Handle("POST /v1/logout", limitBody(maxBody, http.HandlerFunc(authn.Logout)))
	root.HandleFunc("GET /openapi.json", serveOpenAPI)
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	// The console owns its page, its assets, events and API, and the icon.
	// A console request's body is never read, but net/http reads what
	// is left of it before answering: bound that in time too.
	ui := limitBody(maxBody, consoleUI)
	root.Handle("GET /{$}", ui)
	root.Handle("GET /console/static/", ui)
	root.Handle("/console/", limitBody(maxBody, authn.Protect(consoleUI)))
	root.Handle("GET /favicon.ico", ui)
	root.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, kerr.New(kerr.InvalidRequest, "no route for %s %s", r.Method, r.URL.Path))
	})
	var h http.Handler = guard(hosts, noteMuxRoute(root))
	if tp != nil {
		h = traced(h, tp)
	}
	return metrics.measured(recoverPanics(h, log))
}

// traced joins requests to the caller's W3C trace (otelhttp) and names
// their spans after the route, not the path, which holds topic names.
func traced(h http.Handler, tp trace.TracerProvider) http.Handler {
	inner := otelhttp.NewHandler(h, "tidemark-gateway", otelhttp.WithTracerProvider(tp),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			// Only grpc-gateway's router knows the REST route (see
			// noteRESTRoute), and otelhttp names the span after the
			// handler has run.
			if note := noteOf(r); note != nil && strings.HasPrefix(note.route, "/v1/") {
				return r.Method + " " + note.route
			}
			if _, p, ok := strings.Cut(r.Pattern, " "); ok {
				return r.Method + " " + p
			}
			return strings.TrimSpace(r.Method + " " + r.Pattern)
		}))
	return inner
}

// recoverPanics turns a panic in a handler into a logged 500 instead of a
// dropped connection.
func recoverPanics(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			log.Error("panic serving HTTP", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, kerr.New(kerr.UnknownServerError, "internal error"))
		}()
		next.ServeHTTP(w, r)
	})
}

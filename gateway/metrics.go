package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics counts the gateway's HTTP requests by route, never by path:
// paths hold topic and group names without bound.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer, streams *streamSlots) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_gateway_http_requests_total",
			Help: "HTTP requests answered, by method, route and status code (streams once they end)."},
			[]string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_gateway_http_request_duration_seconds",
			Help: "Time to answer an HTTP request, by method and route; streams are not observed.", Buckets: prometheus.DefBuckets},
			[]string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidemark_gateway_streams_open",
		Help: "Streams open now: REST (records:follow, cluster:watch) and the console's event streams."}, streams.openCount))
	return m
}

// routeNote is where the handlers leave, for one request, the route that
// matched and whether the request is a stream.
type routeNote struct {
	route  string
	stream bool
}

// routeKey holds a request's *routeNote in its context.
type routeKey struct{}

func noteOf(r *http.Request) *routeNote {
	n, _ := r.Context().Value(routeKey{}).(*routeNote)
	return n
}

// measured counts each request once it is answered, under its route.
// Streams (a follow, a watch, the console's events) count in requests only:
// their lifetimes would swamp the histogram.
func (m *httpMetrics) measured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note := &routeNote{}
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		defer func() {
			route := note.route
			if route == "" {
				route = "other"
			}
			stream := note.stream || strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream")
			method := methodLabel(r.Method)
			m.requests.WithLabelValues(method, route, strconv.Itoa(rec.code())).Inc()
			if !stream {
				m.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
			}
		}()
		next.ServeHTTP(rec, r.WithContext(contextWithNote(r, note)))
	})
}

// methodLabel is the method label of a request: HTTP's own methods as
// they are, anything else "other". net/http takes any token as a method,
// so the method as sent would give a client a new series per made-up
// method, as the path would per name.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

// noteMuxRoute records the pattern root matched when no REST route did:
// the catch-all ("/") and an unmatched /v1/ path are "other".
func noteMuxRoute(root *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		root.ServeHTTP(w, r)
		note := noteOf(r)
		if note == nil || note.route != "" {
			return
		}
		_, p, ok := strings.Cut(r.Pattern, " ")
		if !ok {
			p = r.Pattern
		}
		if p != "/" && p != "/v1/" {
			note.route = p
		}
	})
}

// noteRESTRoute records the REST route grpc-gateway matched (its pattern,
// as the spans name it).
func noteRESTRoute(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if p, ok := runtime.HTTPPattern(r.Context()); ok {
			if note := noteOf(r); note != nil {
				note.route = p.String()
			}
		}
		next(w, r, params)
	}
}

func contextWithNote(r *http.Request, note *routeNote) context.Context {
	return context.WithValue(r.Context(), routeKey{}, note)
}

// markStream tells measured that the request of ctx is a stream.
func markStream(ctx context.Context) {
	if note, _ := ctx.Value(routeKey{}).(*routeNote); note != nil {
		note.stream = true
	}
}

// statusRecorder remembers the status code written.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Flush keeps streams flowing through the recorder.
func (s *statusRecorder) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (read deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

package gateway

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// restServices are the clients behind the REST routes.
type restServices struct {
	brokers brokerv1.BrokerServiceClient
	groups  groupv1.GroupServiceClient
	admin   adminv1.AdminServiceClient
	faults  faultv1.FaultInjectionServiceClient
	dev     devclusterv1.DevClusterServiceClient
}

// newRESTMux registers the generated REST handlers (the routes of
// gateway.yaml) over the given service clients.
func newRESTMux(ctx context.Context, s restServices, traced bool, maxObjects int) (*runtime.ServeMux, error) {
	m := newJSONMarshaler()
	m.maxObjects = maxObjects
	opts := []runtime.ServeMuxOption{
		runtime.WithMarshalerOption(runtime.MIMEWildcard, m),
		runtime.WithErrorHandler(errorHandler),
		runtime.WithStreamErrorHandler(streamErrorHandler),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		// Split the path as sent at its "/" only, then unescape each
		// parameter whole: a group id may hold "/" (team/app, sent as
		// team%2Fapp), which the legacy mode decoded before splitting, so
		// no route matched. (AllCharacters splits at %2F too; the rest of
		// this mode only concerns "**" parameters, which no route has.)
		runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptReserved),
		// grpc-gateway keeps the query parser process-wide; every gateway
		// sets the same one.
		runtime.SetQueryParameterParser(queryParser{}),
		runtime.WithMiddlewares(noteRESTRoute, bodyOnly, utf8Only),
		// No HTTP header becomes gRPC metadata: Grpc-Metadata-* headers
		// could otherwise name another user to the services (the
		// on-behalf-of key). The user goes by restauth.ForwardUser.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
	}
	if traced {
		opts = append(opts, runtime.WithMiddlewares(nameSpan))
	}
	mux := runtime.NewServeMux(opts...)
	for _, err := range []error{
		adminv1.RegisterAdminServiceHandlerClient(ctx, mux, s.admin),
		brokerv1.RegisterBrokerServiceHandlerClient(ctx, mux, s.brokers),
		groupv1.RegisterGroupServiceHandlerClient(ctx, mux, s.groups),
		faultv1.RegisterFaultInjectionServiceHandlerClient(ctx, mux, s.faults),
		devclusterv1.RegisterDevClusterServiceHandlerClient(ctx, mux, s.dev),
	} {
		if err != nil {
			return nil, err
		}
	}
	return mux, nil
}

// bodyOnly refuses query parameters on POST routes. Every POST rule in
// gateway.yaml takes its whole request from the body (body: "*"), and
// grpc-gateway would ignore the query silently: ?validateOnly=true must
// not create the topic.
func bodyOnly(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if r.Method == http.MethodPost && r.URL.RawQuery != "" {
			first, _, _ := strings.Cut(r.URL.RawQuery, "&")
			field, _, _ := strings.Cut(first, "=")
			if f, err := url.QueryUnescape(field); err == nil {
				field = f
			}
			writeError(w, http.StatusBadRequest, kerr.BadField(kerr.InvalidRequest, field,
				"query parameters are not read on POST routes; put the field in the JSON body"))
			return
		}
		next(w, r, params)
	}
}

// utf8Only refuses path parameters and query values that are not UTF-8
// (%FF, an escaped surrogate). Proto strings must be UTF-8: the request
// failed to marshal on its way to the service, answered 500.
func utf8Only(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if field, ok := notUTF8(params, r.URL.Query()); ok {
			writeError(w, http.StatusBadRequest, kerr.BadField(kerr.InvalidRequest, field, "is not UTF-8 text"))
			return
		}
		next(w, r, params)
	}
}

// notUTF8 names the first parameter, in name order, whose value is not
// UTF-8.
func notUTF8(params map[string]string, query url.Values) (string, bool) {
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if !utf8.ValidString(params[name]) {
			return name, true
		}
	}
	for _, key := range slices.Sorted(maps.Keys(query)) {
		for _, v := range query[key] {
			if !utf8.ValidString(v) {
				return key, true
			}
		}
	}
	return "", false
}

// nameSpan tells the HTTP span which route matched (see traced).
func nameSpan(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if p, ok := runtime.HTTPPattern(r.Context()); ok {
			trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("http.route", p.String()))
		}
		next(w, r, params)
	}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"

	"tidemark.io/gateway/internal/resterr"
)

// httpRule is one rule of gateway.yaml (google.api.HttpRule).
type httpRule struct {
	Selector           string     `json:"selector"`
	Get                string     `json:"get"`
	Post               string     `json:"post"`
	Body               string     `json:"body"`
	AdditionalBindings []httpRule `json:"additional_bindings"`
}

// route is one method and path template the gateway serves.
type route struct {
	method, path string
	operation    string // Service_Method, as the OpenAPI document names it
}

// jsonParams writes a path's parameters as the OpenAPI document does: by
// their JSON names ({group_id} is {groupId}).
func jsonParams(path string) string {
	var b strings.Builder
	inParam, upper := false, false
	for _, c := range path {
		switch {
		case c == '{':
			inParam = true
		case c == '}':
			inParam = false
		case inParam && c == '_':
			upper = true
			continue
		case upper:
			c = unicode.ToUpper(c)
			upper = false
		}
		b.WriteRune(c)
	}
	return b.String()
}

// gatewayRoutes reads the routes from gateway.yaml.
func gatewayRoutes(t testing.TB) []route {
	t.Helper()
	raw, err := os.ReadFile("../gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		HTTP struct {
			Rules []httpRule `json:"rules"`
		} `json:"http"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("gateway.yaml: %v", err)
	}
	var out []route
	var add func(op string, r httpRule)
	add = func(op string, r httpRule) {
		switch {
		case r.Get != "":
			out = append(out, route{http.MethodGet, jsonParams(r.Get), op})
		case r.Post != "":
			out = append(out, route{http.MethodPost, jsonParams(r.Post), op})
		default:
			t.Fatalf("gateway.yaml: rule %s has neither get nor post", op)
		}
		for _, b := range r.AdditionalBindings {
			add(op, b)
		}
	}
	for _, r := range cfg.HTTP.Rules {
		parts := strings.Split(r.Selector, ".")
		if len(parts) < 2 {
			t.Fatalf("gateway.yaml: bad selector %q", r.Selector)
		}
		add(parts[len(parts)-2]+"_"+parts[len(parts)-1], r)
	}
	if len(out) == 0 {
		t.Fatal("gateway.yaml has no rules")
	}
	return out
}

// testOpenAPI checks that /openapi.json is the generated document with the
// hand-written routes added, that it has exactly gateway.yaml's routes and
// those, and that the gateway serves each.
func testOpenAPI(t *testing.T, e *env) {
	a := e.r.do(http.MethodGet, "/openapi.json", nil)
	if a.status != http.StatusOK || !bytes.Equal(a.body, openAPIDoc) {
		t.Fatalf("/openapi.json: status %d, %d bytes; want the %d bytes of the merged document", a.status, len(a.body), len(openAPIDoc))
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(a.body, &doc); err != nil {
		t.Fatalf("/openapi.json is not JSON: %v", err)
	}
	routes := gatewayRoutes(t)
	// The hand-written routes (openapiextra/session.swagger.json) are described
	// and served too.
	routes = append(routes, route{http.MethodPost, "/v1/login", "Session_Login"}, route{http.MethodPost, "/v1/logout", "Session_Logout"})
	inYAML := map[string]bool{}
	for _, r := range routes {
		key := strings.ToLower(r.method) + " " + r.path
		inYAML[key] = true
		op, ok := doc.Paths[r.path][strings.ToLower(r.method)]
		if !ok {
			t.Errorf("%s %s is in gateway.yaml but not in /openapi.json", r.method, r.path)
			continue
		}
		// Additional bindings get a numbered operationId (DescribeTopics2).
		if !strings.HasPrefix(op.OperationID, r.operation) {
			t.Errorf("%s %s: operationId %q, want %q", r.method, r.path, op.OperationID, r.operation)
		}
		checkServed(t, e.r, r)
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !inYAML[method+" "+path] {
				t.Errorf("/openapi.json has %s %s, which neither gateway.yaml nor the hand-written routes have", method, path)
			}
		}
	}
}

// checkServed sends a harmless request to r and requires an answer from
// its handler, not from the router (404 "no route", 405).
func checkServed(t *testing.T, api *rest, r route) {
	t.Helper()
	path := strings.NewReplacer("{topic}", "openapi-probe", "{partition}", "0", "{groupId}", "openapi-probe", "{key}", "openapi-probe").Replace(r.path)
	var body any
	if r.method == http.MethodPost {
		body = "{}"
	}
	resp, closeBody := api.open(r.method, path, body)
	defer closeBody()
	if resp.StatusCode == http.StatusMethodNotAllowed {
		t.Errorf("%s %s: not served (405)", r.method, path)
		return
	}
	if resp.StatusCode == http.StatusNotFound {
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if e.Name != "UNKNOWN_TOPIC_OR_PARTITION" {
			t.Errorf("%s %s: not served (404 %s: %s)", r.method, path, e.Name, e.Message)
		}
	}
}

func testConsole(t *testing.T, e *env) {
	a := e.r.do(http.MethodGet, "/", nil)
	if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(a.body), `href="/openapi.json"`) {
		t.Fatalf("GET /: %d %q: %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	if a := e.r.do(http.MethodGet, "/healthz", nil); a.status != http.StatusOK {
		t.Fatalf("GET /healthz: %d", a.status)
	}
	e.r.fails(http.MethodGet, "/nothing-here", nil, http.StatusNotFound, "INVALID_REQUEST")
	e.r.fails(http.MethodGet, "/v1/nothing-here", nil, http.StatusNotFound, "INVALID_REQUEST")
	e.r.fails(http.MethodDelete, "/v1/topics", nil, http.StatusMethodNotAllowed, "INVALID_REQUEST")
}

// TestOpenAPIMergeRefusesCollisions: a hand-written route that the protos
// also generate is a mistake caught at start, not a silent overwrite.
func TestOpenAPIMergeRefusesCollisions(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "/v1/cluster") {
			t.Fatalf("merging a duplicate path: %v, want a panic naming it", r)
		}
	}()
	mustMergeOpenAPI(generatedOpenAPI, []byte(`{"paths": {"/v1/cluster": {}}}`))
}

// TestOpenAPIErrorBodyIsTheBody: the document's restError has exactly the
// keys an error body may have (resterr.Required and Hints), the required
// ones marked so: a key added to the body and not to the document (a
// hint, the low watermark of a failed records:delete) is caught here.
func TestOpenAPIErrorBodyIsTheBody(t *testing.T) {
	var doc struct {
		Definitions map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	def, ok := doc.Definitions["restError"]
	if !ok {
		t.Fatal("/openapi.json has no restError definition")
	}
	want := slices.Concat(resterr.Required, resterr.Hints)
	var got []string
	for k := range def.Properties {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("restError describes %v, an error body has %v", got, want)
	}
	if req := slices.Sorted(slices.Values(def.Required)); !slices.Equal(req, slices.Sorted(slices.Values(resterr.Required))) {
		t.Errorf("restError requires %v, every error body has %v", def.Required, resterr.Required)
	}
}

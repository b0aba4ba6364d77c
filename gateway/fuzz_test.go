package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/testenv"
)

// FuzzREST sends random requests through the gateway's HTTP handler, in
// front of a real cluster: none may panic or answer 5xx other than 503 and
// 504, and every error must be the JSON error body. The seed corpus is in
// testdata/fuzz/FuzzREST. Run it for a while with
//
//	go test -run '^$' -fuzz FuzzREST -fuzztime 30s -parallel 1 .
//
// (each fuzzing worker starts its own cluster).
func FuzzREST(f *testing.F) {
	tc := startCluster(f)
	tc.CreateTopic("fuzz", 2, 3, map[string]string{"min.insync.replicas": "2", "max.message.bytes": "2048"})
	g := startGateway(f, tc, func(o *Options) {
		o.MaxBodyBytes = 16 << 10
		o.RetryTimeout = 200 * time.Millisecond
	})
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		if tooCostly(method, target, body) {
			testenv.Skip(t, "by design: this input would make the shared cluster slow for the inputs after it")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		// Every call must end with its context; one that hangs takes the
		// process down, so that the fuzzer records the input.
		watchdog := time.AfterFunc(10*time.Second, func() {
			panic(fmt.Sprintf("%s %s %q: still running 10s after its deadline", method, target, body))
		})
		defer watchdog.Stop()
		req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1"+target, bytes.NewReader(body))
		if err != nil {
			return // not a request an HTTP client could send
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		g.handler.ServeHTTP(streamOnce{rec, cancel}, req)

		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable && rec.Code != http.StatusGatewayTimeout {
			t.Fatalf("%s %s %q: status %d: %s", method, target, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Name == "" || e.Message == "" {
				t.Fatalf("%s %s %q: status %d with a body that is not the error JSON: %s", method, target, body, rec.Code, rec.Body.Bytes())
			}
		}
	})
}

// tooCostly spots inputs that would load the fuzzing cluster for every
// later input (the controller accepts any partition count, and broker-wide
// config defaults apply to every topic created afterwards). Their decoding
// and error paths are fuzzed all the same: only valid requests are skipped.
func tooCostly(method, target string, body []byte) bool {
	u, err := url.Parse(target)
	if method != http.MethodPost || err != nil {
		return false
	}
	switch path.Clean(u.Path) {
	case "/v1/topics":
		var req adminv1.CreateTopicsRequest
		if protojson.Unmarshal(body, &req) != nil {
			return false
		}
		for _, s := range req.GetTopics() {
			if s.GetNumPartitions() > 4 || s.GetNumPartitions() < 0 || len(s.GetAssignments()) > 4 {
				return true
			}
		}
		return len(req.GetTopics()) > 4
	case "/v1/configs:alter":
		var req adminv1.AlterConfigsRequest
		return protojson.Unmarshal(body, &req) == nil && !req.GetValidateOnly()
	}
	return strings.Contains(target, "%") // escaped paths could bypass the checks above
}

// streamOnce ends a stream after its first flushed line: the status and
// that line are all the checks need, and streams never end by themselves.
type streamOnce struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (s streamOnce) Flush() {
	s.ResponseRecorder.Flush()
	s.cancel()
}

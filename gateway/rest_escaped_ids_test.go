package gateway

import (
	"net/http"
	"strings"
	"testing"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
)

// A group id may hold any character, "/" too (a Kafka client can name a
// group team/app), and may be "." or "..": percent-encoded in the path,
// each reaches its group's routes. A topic name so encoded reaches the
// handler too, which refuses it naming the topic.
func TestRESTEscapedIDsReachTheirRoutes(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("escaped", 1, 3, nil)
	api := newREST(t, startGateway(t, tc, nil))
	if a := api.do(http.MethodPost, "/v1/topics/escaped/partitions/0/records", produceBody(-1, "a", "b", "c")); a.status != http.StatusOK {
		t.Fatalf("produce: %d %s", a.status, a.body)
	}
	for _, g := range []struct{ id, inPath string }{
		{"a/b", "a%2Fb"},
		{"team/app/x", "team%2Fapp%2Fx"},
		{".", "%2E"},
		{"..", "%2E%2E"},
	} {
		base := "/v1/groups/" + g.inPath
		api.ok(http.MethodPost, base+"/offsets",
			`{"generationId": -1, "topics": [{"name": "escaped", "partitions": [{"partition": 0, "committedOffset": 1, "committedLeaderEpoch": -1}]}]}`, nil)
		var fetched groupv1.OffsetFetchResponse
		decode(t, api.do200(http.MethodGet, base+"/offsets"), &fetched)
		if ts := fetched.GetTopics(); len(ts) != 1 || ts[0].GetPartitions()[0].GetCommittedOffset() != 1 {
			t.Fatalf("group %q: offsets %v", g.id, &fetched)
		}
		var lag groupv1.DescribeGroupLagResponse
		decode(t, api.do200(http.MethodGet, base+"/lag"), &lag)
		if lag.GetGroupId() != g.id || len(lag.GetPartitions()) != 1 || lag.GetPartitions()[0].GetLag() != 2 {
			t.Fatalf("group %q: lag %v", g.id, &lag)
		}
	}
	var listed groupv1.ListGroupsResponse
	decode(t, api.do200(http.MethodGet, "/v1/groups"), &listed)
	seen := map[string]bool{}
	for _, g := range listed.GetGroups() {
		seen[g.GetGroupId()] = true
	}
	for _, id := range []string{"a/b", "team/app/x", ".", ".."} {
		if !seen[id] {
			t.Fatalf("group %q not listed: %v", id, &listed)
		}
	}
	if eb := api.fails(http.MethodGet, "/v1/topics/a%2Fb/partitions/0/records?offset=0", nil,
		http.StatusBadRequest, "INVALID_TOPIC_EXCEPTION"); eb.Field != "topic" {
		t.Fatalf("a topic name with a slash refused naming %q, want topic", eb.Field)
	}
}

// The unescaping mode (mux.go) unescapes a one-segment parameter whole but
// would leave "%2F" and the other reserved escapes in a "{name=**}" one: no
// route may have such a parameter unnoticed.
func TestRoutesHaveOnlyOneSegmentParameters(t *testing.T) {
	for _, r := range gatewayRoutes(t) {
		if strings.ContainsAny(r.path, "*=") {
			t.Errorf("%s %s: a parameter of more than one segment; check how mux.go unescapes it", r.method, r.path)
		}
	}
}

// do200 calls and requires 200, returning the body.
func (r *rest) do200(method, path string) []byte {
	r.t.Helper()
	a := r.do(method, path, nil)
	if a.status != http.StatusOK {
		r.t.Fatalf("%s %s: status %d, want 200: %s", method, path, a.status, a.body)
	}
	return a.body
}

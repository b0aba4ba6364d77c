package gateway

import (
	"net/http"
	"strings"
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// testACLs creates, lists and deletes ACL bindings over REST; a creation
// Kafka refuses is 400 with Kafka's message.
func testACLs(t *testing.T, e *env) {
	var cr adminv1.CreateAclsResponse
	e.call(http.MethodPost, "/v1/acls", `{"creations": [{"resourceType": "TOPIC", "resourceName": "rest-", "patternType": "PREFIXED",
		"principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]}`, &cr)
	if r := cr.GetResults(); len(r) != 1 || r[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v", &cr)
	}
	if eb := e.r.fails(http.MethodPost, "/v1/acls", `{"creations": [{"resourceType": "TOPIC", "resourceName": "x", "patternType": "MATCH",
		"principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]}`, http.StatusBadRequest, "INVALID_REQUEST"); !strings.Contains(eb.Message, "Invalid patternType MATCH") {
		t.Errorf("refused creation: %q, want Kafka's message", eb.Message)
	}
	var d adminv1.DescribeAclsResponse
	e.call(http.MethodPost, "/v1/acls:describe", `{"filter": {"resourceType": "TOPIC", "resourceName": "rest-1", "patternType": "MATCH"}}`, &d)
	if b := d.GetBindings(); len(b) != 1 || b[0].GetResourceName() != "rest-" || b[0].GetPatternType() != "PREFIXED" {
		t.Fatalf("describe matching rest-1: %v", &d)
	}
	var del adminv1.DeleteAclsResponse
	e.call(http.MethodPost, "/v1/acls:delete", `{"filters": [{"principal": "User:alice"}]}`, &del)
	if r := del.GetResults(); len(r) != 1 || len(r[0].GetDeleted()) != 1 {
		t.Fatalf("delete: %v", &del)
	}
	d.Reset()
	e.call(http.MethodPost, "/v1/acls:describe", `{"filter": {}}`, &d)
	if len(d.GetBindings()) != 0 {
		t.Fatalf("left after the delete: %v", &d)
	}
}

// An ACL filter with an element none of Kafka's enums names (a misspelt
// type or operation) is refused naming it. It matched nothing: a describe
// answered no bindings and a delete deleted none, both 200, while the
// binding the caller meant stayed.
func TestRESTMisspeltACLFilterIsRefusedNamingTheField(t *testing.T) {
	tc := startCluster(t)
	e := &env{tc: tc, r: newREST(t, startGateway(t, tc, nil))}
	var cr adminv1.CreateAclsResponse
	e.call(http.MethodPost, "/v1/acls", `{"creations": [{"resourceType": "TOPIC", "resourceName": "kept", "patternType": "LITERAL",
		"principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]}`, &cr)
	cases := []struct{ filter, field string }{
		{`{"resourceType": "TOPICS"}`, "resource_type"},
		{`{"patternType": "EXACT"}`, "pattern_type"},
		{`{"principal": "User:alice", "operation": "read"}`, "operation"},
		{`{"permissionType": "PERMIT"}`, "permission_type"},
	}
	for _, c := range cases {
		eb := e.r.fails(http.MethodPost, "/v1/acls:describe", `{"filter": `+c.filter+`}`, http.StatusBadRequest, "INVALID_REQUEST")
		if eb.Field != c.field {
			t.Errorf("describe %s: field %q (%s), want %q", c.filter, eb.Field, eb.Message, c.field)
		}
		eb = e.r.fails(http.MethodPost, "/v1/acls:delete", `{"filters": [`+c.filter+`]}`, http.StatusBadRequest, "INVALID_REQUEST")
		if !strings.Contains(eb.Message, c.field) {
			t.Errorf("delete %s: %s, want %q named", c.filter, eb.Message, c.field)
		}
	}
	// Kafka's names for what tidemark has none of match nothing, refused
	// by no one.
	var d adminv1.DescribeAclsResponse
	e.call(http.MethodPost, "/v1/acls:describe", `{"filter": {"resourceType": "TRANSACTIONAL_ID", "operation": "CLUSTER_ACTION"}}`, &d)
	if len(d.GetBindings()) != 0 {
		t.Fatalf("a transactional id filter matched %v", &d)
	}
	e.call(http.MethodPost, "/v1/acls:describe", `{"filter": {"resourceType": "TOPIC", "operation": "READ", "permissionType": "ALLOW", "patternType": "MATCH"}}`, &d)
	if b := d.GetBindings(); len(b) != 1 || b[0].GetResourceName() != "kept" {
		t.Fatalf("the binding is not listed: %v", &d)
	}
}

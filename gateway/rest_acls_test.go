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

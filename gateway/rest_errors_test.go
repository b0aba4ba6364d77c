package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// testBadInput sends bad bodies, paths and query values: each is a 400
// whose error names the field at fault.
func testBadInput(t *testing.T, e *env) {
	cases := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"acks out of range", "POST", ordersPath + "/records", produceBody(5, "x"), 400, "INVALID_REQUIRED_ACKS", "acks"},
		{"acks not a number", "POST", ordersPath + "/records", `{"acks": "all", "records": {"records": [{"value": "eA=="}]}}`, 400, "INVALID_REQUEST", "acks"},
		{"malformed JSON", "POST", ordersPath + "/records", `{"acks": -1, "records": `, 400, "INVALID_REQUEST", ""},
		{"body not an object", "POST", "/v1/topics", `[1, 2]`, 400, "INVALID_REQUEST", "body"},
		{"unknown body field", "POST", ordersPath + "/records", `{"acks": -1, "ack": 1}`, 400, "INVALID_REQUEST", "ack"},
		{"bad base64 deep inside", "POST", ordersPath + "/records",
			`{"acks": 1, "records": {"records": [{"value": "eA=="}, {"value": "not base64!"}]}}`, 400, "INVALID_REQUEST", "records.records[1].value"},
		{"payload given twice", "POST", ordersPath + "/records",
			`{"recordBatch": "eA==", "records": {"records": []}}`, 400, "INVALID_REQUEST", "records"},
		{"no records", "POST", ordersPath + "/records", `{"acks": 1}`, 400, "INVALID_REQUEST", "payload"},
		{"bad topic config", "POST", "/v1/topics", `{"topics": [{"name": "t", "configs": {"min.insync.replicas": 2}}]}`, 400, "INVALID_REQUEST", "topics[0].configs"},
		{"bad enum", "POST", "/v1/elect-leaders", `{"electionType": "ELECTION_TYPE_SOMETIMES"}`, 400, "INVALID_REQUEST", "electionType"},
		{"partition not a number", "GET", "/v1/topics/orders/partitions/first/records", "", 400, "INVALID_REQUEST", "partition"},
		{"offset not a number", "GET", ordersPath + "/records?offset=last", "", 400, "INVALID_REQUEST", "offset"},
		{"unknown query parameter", "GET", ordersPath + "/records?ofset=3", "", 400, "INVALID_REQUEST", "ofset"},
		{"path field as a query parameter", "GET", ordersPath + "/records?partition=5", "", 400, "INVALID_REQUEST", "partition"},
		{"path field as a query parameter, JSON name", "GET", ordersPath + "/offsets?spec=LATEST&topic=payments", "", 400, "INVALID_REQUEST", "topic"},
		{"same field twice", "GET", ordersPath + "/records?max_bytes=1&maxBytes=2", "", 400, "INVALID_REQUEST", "max_bytes"},
		{"bad spec", "GET", ordersPath + "/offsets?spec=NEWEST", "", 400, "INVALID_REQUEST", "spec"},
		{"spec missing", "GET", ordersPath + "/offsets", "", 400, "INVALID_REQUEST", "spec"},
		{"negative offset", "GET", ordersPath + "/records?offset=-1", "", 400, "OFFSET_OUT_OF_RANGE", "offset"},
		{"bad bool filter", "GET", "/v1/topics?underReplicated=maybe", "", 400, "INVALID_REQUEST", "underReplicated"},
		{"query on a POST route", "POST", "/v1/topics?validateOnly=true", `{"topics": [{"name": "q"}]}`, 400, "INVALID_REQUEST", "validateOnly"},
		{"unknown topic", "GET", "/v1/topics/nope/partitions/0/records", "", 404, "UNKNOWN_TOPIC_OR_PARTITION", "topic"},
		{"unknown partition", "POST", "/v1/topics/orders/partitions/7/records", produceBody(1, "x"), 404, "UNKNOWN_TOPIC_OR_PARTITION", "partition"},
		{"message too large", "POST", "/v1/topics/small/partitions/0/records", produceBody(1, strings.Repeat("x", 2000)), 413, "", ""},
	}
	for _, c := range cases {
		var body any
		if c.body != "" {
			body = c.body
		}
		a := e.r.do(c.method, c.path, body)
		if c.code == "" { // MESSAGE_TOO_LARGE or RECORD_LIST_TOO_LARGE, as the broker sees it
			if a.status != c.status || !strings.Contains(string(a.body), "TOO_LARGE") {
				t.Errorf("%s: %d %s, want %d ..._TOO_LARGE", c.name, a.status, a.body, c.status)
			}
			continue
		}
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, a.status, c.status, a.body)
			continue
		}
		got := expectError(t, a, c.name, c.status, c.code)
		if got.Field != c.field || !strings.Contains(got.Message, c.field) {
			t.Errorf("%s: field %q, message %q; want the field %q named", c.name, got.Field, got.Message, c.field)
		}
	}
}

// testTooLarge sends bodies over the gateway's limit (256 KiB here), with
// and without Content-Length.
func testTooLarge(t *testing.T, e *env) {
	big := produceBody(1, strings.Repeat("x", 300<<10))
	e.r.fails(http.MethodPost, ordersPath+"/records", big, http.StatusRequestEntityTooLarge, "RECORD_LIST_TOO_LARGE")

	// Chunked: the length is not known up front; the gateway stops
	// reading at the limit.
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.Copy(pw, strings.NewReader(big))
		_ = pw.Close()
	}()
	e.r.fails(http.MethodPost, ordersPath+"/records", pr, http.StatusRequestEntityTooLarge, "RECORD_LIST_TOO_LARGE")
	_ = pr.Close()

	// Under the limit is fine.
	e.call(http.MethodPost, ordersPath+"/records", produceBody(1, strings.Repeat("x", 100<<10)), nil)
}

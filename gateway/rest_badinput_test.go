package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
)

// Bad input over REST gets a 400 with the JSON error body naming the
// field, and the gateway answers a good call after it. Each case was
// answered 200 before: the producer epoch wrapped to int16 (65536 was
// taken for epoch 0), a negative DeleteRecords wait was taken for the
// default, and strings too long for the group coordinator's records were
// stored with a wrapped length.
func TestRESTBadInputNamesTheField(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, nil)
	e := &env{tc: tc, g: g, r: newREST(t, g)}
	tc.CreateTopic("bad", 1, 3, nil)
	const path = "/v1/topics/bad/partitions/0"
	waitFor(t, 10*time.Second, "a leader of bad-0", func() bool {
		return e.r.do(http.MethodGet, path+"/offsets?spec=OFFSET_SPEC_LATEST", nil).status == http.StatusOK
	})
	var pid brokerv1.InitProducerIdResponse
	e.call(http.MethodPost, "/v1/producer-ids", `{}`, &pid)
	long := strings.Repeat("g", 1<<15)
	cases := []struct {
		method, path, body string
		name, field        string
	}{
		{http.MethodPost, path + "/records",
			fmt.Sprintf(`{"acks": -1, "producerId": "%d", "producerEpoch": 65536, "records": {"records": [{"value": "eA=="}]}}`, pid.GetProducerId()),
			"INVALID_REQUEST", "producer_epoch"},
		{http.MethodPost, path + "/records:delete", `{"offset": 0, "timeoutMs": -1}`, "INVALID_REQUEST", "timeout_ms"},
		{http.MethodGet, "/v1/groups/" + long + "/coordinator", "", "INVALID_GROUP_ID", "key"},
		{http.MethodPost, "/v1/groups/app/members:join",
			`{"sessionTimeoutMs": 10000, "protocolType": "consumer", "protocols": [{"name": "range"}], "clientId": "` + long + `"}`,
			"INVALID_REQUEST", "client_id"},
	}
	for _, c := range cases {
		var body any
		if c.body != "" {
			body = c.body
		}
		got := e.r.fails(c.method, c.path, body, http.StatusBadRequest, c.name)
		if got.Field != c.field || !strings.Contains(got.Message, c.field) {
			t.Errorf("%s %.60s: field %q (%.200s), want %q named", c.method, c.path, got.Field, got.Message, c.field)
		}
		e.call(http.MethodGet, "/v1/metadata?topics=bad", nil, nil)
	}
	var f brokerv1.FetchResponse
	e.call(http.MethodGet, path+"/records?offset=0", nil, &f)
	if len(f.GetRecords()) != 0 {
		t.Fatalf("the refused produce left records: %v", f.GetRecords())
	}
}

// A partition that can never exist, a topic name Kafka's rule forbids or a
// negative partition, is refused at once with 400 naming the field, before
// any broker is asked. Both were asked about for the 2 s the gateway waits
// for a topic just created, then answered 404 UNKNOWN_TOPIC_OR_PARTITION.
func TestRESTIllegalPartitionIsRefusedNamingTheField(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, nil)
	e := &env{tc: tc, g: g, r: newREST(t, g)}
	tc.CreateTopic("legal", 1, 3, nil)
	waitFor(t, 10*time.Second, "a leader of legal-0", func() bool {
		return e.r.do(http.MethodGet, "/v1/topics/legal/partitions/0/offsets?spec=OFFSET_SPEC_LATEST", nil).status == http.StatusOK
	})
	cases := []struct {
		topic, partition string
		name, field      string
	}{
		{"a%00b", "0", "INVALID_TOPIC_EXCEPTION", "topic"},
		{"a%20b", "0", "INVALID_TOPIC_EXCEPTION", "topic"},
		{"caf%C3%A9", "0", "INVALID_TOPIC_EXCEPTION", "topic"},
		{"%2E", "0", "INVALID_TOPIC_EXCEPTION", "topic"},
		{strings.Repeat("x", 250), "0", "INVALID_TOPIC_EXCEPTION", "topic"},
		{"legal", "-1", "INVALID_PARTITIONS", "partition"},
	}
	for _, c := range cases {
		base := "/v1/topics/" + c.topic + "/partitions/" + c.partition
		for _, call := range []struct{ method, path, body string }{
			{http.MethodGet, base + "/records?offset=0", ""},
			{http.MethodPost, base + "/records", produceBody(-1, "one")},
			{http.MethodGet, base + "/offsets?spec=OFFSET_SPEC_LATEST", ""},
			{http.MethodPost, base + "/records:delete", `{"offset": 0}`},
			{http.MethodGet, base + "/records:follow?offset=0", ""},
		} {
			var body any
			if call.body != "" {
				body = call.body
			}
			got := e.r.fails(call.method, call.path, body, http.StatusBadRequest, c.name)
			if got.Field != c.field || !strings.Contains(got.Message, c.field) || len(got.Message) > 1024 {
				t.Errorf("%s %.80s: field %q (%.200s), want %q named", call.method, call.path, got.Field, got.Message, c.field)
			}
		}
	}
	e.call(http.MethodPost, "/v1/topics/legal/partitions/0/records", produceBody(-1, "one"), nil)
}

// A batched call whose every item was refused answers the item's error
// naming the item, as a bad input names its field: the answer named none,
// and a caller of several topics could not tell which one was wrong but by
// parsing the message.
func TestRESTBatchedRefusalsNameTheItem(t *testing.T) {
	tc := startCluster(t)
	e := &env{tc: tc, r: newREST(t, startGateway(t, tc, nil))}
	cases := []struct {
		path, body  string
		status      int
		name, field string
	}{
		{"/v1/topics", `{"topics": [{"name": "", "numPartitions": 1, "replicationFactor": 1}]}`,
			http.StatusBadRequest, "INVALID_TOPIC_EXCEPTION", "topics[0]"},
		{"/v1/topics", `{"topics": [{"name": "one", "numPartitions": -1, "replicationFactor": 1}, {"name": "two", "numPartitions": 1, "replicationFactor": -1}]}`,
			http.StatusBadRequest, "INVALID_PARTITIONS", "topics[0]"},
		{"/v1/topics:describe", `{"topics": ["ghost"]}`, http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION", "topics[0]"},
		{"/v1/topics:delete", `{"topics": ["ghost", "phantom"]}`, http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION", "topics[0]"},
		{"/v1/partitions", `{"topics": [{"name": "ghost", "count": 2}]}`, http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION", "topics[0]"},
		{"/v1/groups:describe", `{"groupIds": [""]}`, http.StatusBadRequest, "INVALID_GROUP_ID", "group_ids[0]"},
		{"/v1/acls", `{"creations": [{"resourceType": "TOPIC", "resourceName": "", "patternType": "LITERAL",
			"principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]}`,
			http.StatusBadRequest, "INVALID_REQUEST", "creations[0]"},
	}
	for _, c := range cases {
		got := e.r.fails(http.MethodPost, c.path, c.body, c.status, c.name)
		if got.Field != c.field {
			t.Errorf("POST %s %s: field %q (%s), want %q", c.path, c.body, got.Field, got.Message, c.field)
		}
	}
}

// Text that is not UTF-8 in a path segment or a query value (%FF, or an
// escaped surrogate) is refused with 400 naming the parameter. Proto
// strings must be UTF-8, so the gateway's own gRPC call failed to marshal
// the request and the caller got 500 UNKNOWN_SERVER_ERROR.
func TestRESTTextThatIsNotUTF8IsRefusedNamingTheField(t *testing.T) {
	tc := startCluster(t)
	e := &env{tc: tc, r: newREST(t, startGateway(t, tc, nil))}
	cases := []struct{ method, path, body, field string }{
		{http.MethodGet, "/v1/groups/ok%FF/coordinator", "", "key"},
		{http.MethodGet, "/v1/groups/%FF/lag", "", "group_id"},
		{http.MethodGet, "/v1/groups/%ED%A0%80/offsets", "", "group_id"},
		{http.MethodPost, "/v1/groups/g%FF/members:join",
			`{"sessionTimeoutMs": 10000, "protocolType": "consumer", "protocols": [{"name": "range"}]}`, "group_id"},
		{http.MethodGet, "/v1/metadata?topics=%FF", "", "topics"},
		{http.MethodGet, "/v1/topics?topics=ok&topics=%ED%A0%80", "", "topics"},
		{http.MethodGet, "/v1/groups?statesFilter=%FF", "", "statesFilter"},
	}
	for _, c := range cases {
		var body any
		if c.body != "" {
			body = c.body
		}
		got := e.r.fails(c.method, c.path, body, http.StatusBadRequest, "INVALID_REQUEST")
		if got.Field != c.field || !strings.Contains(got.Message, "UTF-8") {
			t.Errorf("%s %s: field %q (%s), want %q named as not UTF-8", c.method, c.path, got.Field, got.Message, c.field)
		}
	}
	e.call(http.MethodGet, "/v1/groups/ok/coordinator", nil, nil)
}

// A JSON string whose \u escape is half of a UTF-16 pair (a lone
// surrogate: valid JSON, but no text) is refused naming the field and
// saying so. The answer said "unexpected EOF", or "invalid escape code"
// quoting the bytes after it, which sent the caller looking for a
// truncated body.
func TestRESTLoneSurrogateEscapeIsRefusedSayingSo(t *testing.T) {
	tc := startCluster(t)
	e := &env{tc: tc, r: newREST(t, startGateway(t, tc, nil))}
	cases := []struct{ path, body, field string }{
		{"/v1/groups:describe", `{"groupIds": ["\udc00"]}`, "groupIds[0]"},
		{"/v1/topics:describe", `{"topics": ["ok", "a\ud800b"]}`, "topics[1]"},
		{"/v1/topics", `{"topics": [{"name": "q", "numPartitions": 1, "replicationFactor": 1, "configs": {"\udc00": "1"}}]}`, "topics[0].configs"},
	}
	for _, c := range cases {
		got := e.r.fails(http.MethodPost, c.path, c.body, http.StatusBadRequest, "INVALID_REQUEST")
		if got.Field != c.field || !strings.Contains(got.Message, "surrogate") {
			t.Errorf("POST %s %s: field %q (%s), want %q named as a lone surrogate", c.path, c.body, got.Field, got.Message, c.field)
		}
	}
}

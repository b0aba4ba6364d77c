package gateway

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
)

// filters are the describe filters, by their query parameter names.
var filters = []string{"underReplicated", "atMinIsr", "underMinIsr", "unavailable"}

// describe lists the topics a describe query returns.
func describe(t testing.TB, e *env, query string) *adminv1.DescribeTopicsResponse {
	t.Helper()
	var d adminv1.DescribeTopicsResponse
	e.call(http.MethodGet, "/v1/topics?"+query, nil, &d)
	return &d
}

// names lists "topic-partition" for every partition of a describe answer.
func names(d *adminv1.DescribeTopicsResponse) []string {
	var out []string
	for _, td := range d.GetTopics() {
		for _, p := range td.GetPartitions() {
			out = append(out, td.GetName()+"-"+strconv.Itoa(int(p.GetPartition())))
		}
	}
	slices.Sort(out)
	return out
}

// expectFiltered requires each filter to list exactly the given partitions
// of the given topics.
func expectFiltered(t testing.TB, e *env, topics string, want map[string][]string) {
	t.Helper()
	for _, f := range filters {
		got := names(describe(t, e, "topics="+topics+"&"+f+"=true"))
		if !slices.Equal(got, want[f]) {
			t.Errorf("describe %s with %s: %v, want %v", topics, f, got, want[f])
		}
	}
}

func testDescribeHealthy(t *testing.T, e *env) {
	all := describe(t, e, "")
	if got := names(all); !slices.Contains(got, "orders-0") || !slices.Contains(got, "small-0") {
		t.Fatalf("describe all: %v", got)
	}
	d := describe(t, e, "topics=orders&include_configs=true")
	p := d.GetTopics()[0].GetPartitions()[0]
	if len(p.GetReplicas()) != 3 || len(p.GetIsr()) != 3 || p.GetMinInsyncReplicas() != 2 || p.GetLeader() != p.GetReplicas()[0] ||
		d.GetTopics()[0].GetConfigs()["min.insync.replicas"] != "2" {
		t.Fatalf("describe orders: %v", d)
	}
	// The POST form takes the same request as a body.
	var viaPost adminv1.DescribeTopicsResponse
	e.call(http.MethodPost, "/v1/topics:describe", `{"topics": ["orders"]}`, &viaPost)
	if !slices.Equal(names(&viaPost), []string{"orders-0"}) {
		t.Fatalf("describe by POST: %v", &viaPost)
	}
	expectFiltered(t, e, "orders", nil)
	e.r.fails(http.MethodGet, "/v1/topics?topics=nope", nil, http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION")
}

func testConfigs(t *testing.T, e *env) {
	var alt adminv1.AlterConfigsResponse
	e.call(http.MethodPost, "/v1/configs:alter", `{"resources": [{
		"resource": {"type": "CONFIG_RESOURCE_TYPE_TOPIC", "name": "orders"},
		"ops": [{"name": "retention.ms", "value": "3600000", "op": "CONFIG_OP_TYPE_SET"}]}]}`, &alt)
	if r := alt.GetResults(); len(r) != 1 || r[0].GetErrorCode() != 0 {
		t.Fatalf("alter configs: %v", &alt)
	}
	var desc adminv1.DescribeConfigsResponse
	e.call(http.MethodPost, "/v1/configs:describe",
		`{"resources": [{"type": "CONFIG_RESOURCE_TYPE_TOPIC", "name": "orders"}]}`, &desc)
	found := false
	for _, c := range desc.GetResults()[0].GetEntries() {
		if c.GetName() == "retention.ms" {
			found = c.GetValue() == "3600000" && c.GetSource() == adminv1.ConfigSource_CONFIG_SOURCE_TOPIC
		}
	}
	if !found {
		t.Fatalf("retention.ms not set on orders: %v", &desc)
	}
	e.r.fails(http.MethodPost, "/v1/configs:alter", `{"resources": [{
		"resource": {"type": "CONFIG_RESOURCE_TYPE_TOPIC", "name": "orders"},
		"ops": [{"name": "retention.ms", "value": "soon", "op": "CONFIG_OP_TYPE_SET"}]}]}`,
		http.StatusBadRequest, "INVALID_CONFIG")
	e.r.fails(http.MethodPost, "/v1/configs:describe", `{"resources": [{"type": "CONFIG_RESOURCE_TYPE_TOPIC", "name": "nope"}]}`,
		http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION")
}

// testUsers sets and describes a user's SCRAM credential over REST (the
// salt and salted password, base64 in JSON) and gets Kafka's per-user
// errors as HTTP statuses.
func testUsers(t *testing.T, e *env) {
	salted := base64.StdEncoding.EncodeToString(make([]byte, 32))
	var alt adminv1.AlterUserScramCredentialsResponse
	e.call(http.MethodPost, "/v1/users/scram:alter", `{"upsertions": [{"user": "alice", "mechanism": "SCRAM-SHA-512",
		"iterations": 4096, "salt": "c2FsdA==", "saltedPassword": "`+salted+`"}]}`, &alt)
	if r := alt.GetResults(); len(r) != 1 || r[0].GetUser() != "alice" || r[0].GetErrorCode() != 0 {
		t.Fatalf("alter users: %v", &alt)
	}
	var desc adminv1.DescribeUserScramCredentialsResponse
	e.call(http.MethodPost, "/v1/users/scram:describe", `{"users": ["alice"]}`, &desc)
	if r := desc.GetResults(); len(r) != 1 || len(r[0].GetCredentials()) != 1 || r[0].GetCredentials()[0].GetIterations() != 4096 {
		t.Fatalf("describe users: %v", &desc)
	}
	e.r.fails(http.MethodPost, "/v1/users/scram:describe", `{"users": ["nobody"]}`, http.StatusNotFound, "RESOURCE_NOT_FOUND")
	e.r.fails(http.MethodPost, "/v1/users/scram:alter", `{"upsertions": [{"user": "bob", "mechanism": "SCRAM-SHA-512",
		"iterations": 100, "salt": "c2FsdA==", "saltedPassword": "`+salted+`"}]}`, http.StatusBadRequest, "UNACCEPTABLE_CREDENTIAL")
}

// electPreferred runs a preferred election for orders-0.
func electPreferred(e *env) answer {
	return e.r.do(http.MethodPost, "/v1/elect-leaders",
		`{"electionType": "ELECTION_TYPE_PREFERRED", "partitions": [{"topic": "orders", "partition": 0}], "timeoutMs": 5000}`)
}

func testElectLeaders(t *testing.T, e *env) {
	// The preferred replica leads already: 200, with the code in the item.
	var el adminv1.ElectLeadersResponse
	e.call(http.MethodPost, "/v1/elect-leaders",
		`{"electionType": "ELECTION_TYPE_PREFERRED", "partitions": [{"topic": "orders", "partition": 0}]}`, &el)
	if r := el.GetResults(); len(r) != 1 || r[0].GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED {
		t.Fatalf("preferred election on a healthy partition: %v", &el)
	}
	e.call(http.MethodPost, "/v1/elect-leaders", `{"electionType": "ELECTION_TYPE_PREFERRED", "allPartitions": true}`, &el)
	e.r.fails(http.MethodPost, "/v1/elect-leaders",
		`{"electionType": "ELECTION_TYPE_PREFERRED", "partitions": [{"topic": "nope", "partition": 0}]}`,
		http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION")
}

// testClientQuotas sets, lists and removes a client quota entity over REST;
// a refused entity is Kafka's INVALID_REQUEST, HTTP 400.
func testClientQuotas(t *testing.T, e *env) {
	var alt adminv1.AlterClientQuotasResponse
	e.call(http.MethodPost, "/v1/quotas:alter", `{"entries": [{"entity": [{"entityType": "user", "entityName": "alice"}, {"entityType": "client-id"}],
		"ops": [{"key": "producer_byte_rate", "value": 1048576}]}]}`, &alt)
	if r := alt.GetResults(); len(r) != 1 || r[0].GetErrorCode() != 0 {
		t.Fatalf("alter quotas: %v", &alt)
	}
	var desc adminv1.DescribeClientQuotasResponse
	e.call(http.MethodPost, "/v1/quotas:describe", `{"components": [{"entityType": "client-id", "matchType": "DEFAULT"}]}`, &desc)
	if r := desc.GetEntries(); len(r) != 1 || r[0].GetValues()["producer_byte_rate"] != 1048576 || len(r[0].GetEntity()) != 2 || r[0].GetEntity()[1].EntityName != nil {
		t.Fatalf("describe quotas: %v", &desc)
	}
	if eb := e.r.fails(http.MethodPost, "/v1/quotas:alter", `{"entries": [{"entity": [{"entityType": "client-id", "entityName": "app"}],
		"ops": [{"key": "request_percentage", "value": 50}]}]}`, http.StatusBadRequest, "INVALID_REQUEST"); !strings.Contains(eb.Message, "request_percentage") {
		t.Errorf("refusal %+v does not name the key", eb)
	}
	e.r.fails(http.MethodPost, "/v1/quotas:describe", `{"components": [{"entityType": "user", "matchType": "EXACT"}]}`, http.StatusBadRequest, "INVALID_REQUEST")
	e.call(http.MethodPost, "/v1/quotas:alter", `{"entries": [{"entity": [{"entityType": "user", "entityName": "alice"}, {"entityType": "client-id"}],
		"ops": [{"key": "producer_byte_rate", "remove": true}]}]}`, &alt)
	e.call(http.MethodPost, "/v1/quotas:describe", `{}`, &desc)
	if len(desc.GetEntries()) != 0 {
		t.Fatalf("after the removal: %v", &desc)
	}
}

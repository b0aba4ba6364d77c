package gateway

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Over REST, describing a topic the user may not Describe beside one she
// may answers 200 with each topic's own outcome, the refused one carrying
// its Kafka error name; naming only refused topics is the refusal, 403.
// Before, the one refused topic made the whole call a 403.
func TestRESTDescribeAnswersARefusedTopicAlone(t *testing.T) {
	tc, g := startSecureCluster(t, "allow User:alice Describe Topic:orders-*\n", aliceToken+" alice\n", nil)
	tc.CreateTopic("orders-1", 1, 3, nil)
	tc.CreateTopic("payroll", 1, 3, nil)
	s := &secureSetup{dir: tc.PKIDir, base: "https://" + g.Addr()}
	hc := s.client(t, "", "")
	a := s.req(t, hc, "GET", "/v1/topics?topics=orders-1&topics=payroll", "", bearer(aliceToken)...)
	var described struct {
		Topics []struct {
			Name       string `json:"name"`
			ErrorCode  string `json:"errorCode"`
			Partitions []any  `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(a.body, &described); a.status != http.StatusOK || err != nil || len(described.Topics) != 2 {
		t.Fatalf("describe orders-1 and payroll: %d %s", a.status, a.body)
	}
	for _, d := range described.Topics {
		switch d.Name {
		case "orders-1":
			if d.ErrorCode != "ERROR_CODE_UNSPECIFIED" || len(d.Partitions) != 1 {
				t.Errorf("orders-1: %+v, want described", d)
			}
		case "payroll":
			if d.ErrorCode != "ERROR_CODE_TOPIC_AUTHORIZATION_FAILED" || len(d.Partitions) != 0 {
				t.Errorf("payroll: %+v, want TOPIC_AUTHORIZATION_FAILED and nothing of it", d)
			}
		default:
			t.Errorf("described %q, not asked for", d.Name)
		}
	}
	expectError(t, s.req(t, hc, "GET", "/v1/topics?topics=payroll", "", bearer(aliceToken)...), "describe payroll alone",
		http.StatusForbidden, "TOPIC_AUTHORIZATION_FAILED")
}

// Listed in pages, all topics show only those the user may Describe, and
// every page but the last is full of them: the topics she may not see take
// no place in a page and no page token names one (a token holds the last
// name served). When the answers were trimmed after the page was cut, a
// page ending on a hidden topic came back short or empty, its token
// naming that topic.
func TestRESTPagesHoldOnlyTheTopicsTheUserMaySee(t *testing.T) {
	acl := "allow User:alice Describe Topic:pg-a\nallow User:alice Describe Topic:pg-c\nallow User:alice Describe Topic:pg-e\n"
	tc, g := startSecureCluster(t, acl, aliceToken+" alice\n", nil)
	for _, name := range []string{"pg-a", "pg-b", "pg-c", "pg-d", "pg-e"} {
		tc.CreateTopic(name, 1, 1, nil)
	}
	s := &secureSetup{dir: tc.PKIDir, base: "https://" + g.Addr()}
	hc := s.client(t, "", "")
	for _, path := range []string{"/v1/topics", "/v1/metadata"} {
		var pages [][]string
		token := ""
		for len(pages) < 10 {
			q := path + "?pageSize=1"
			if token != "" {
				q += "&pageToken=" + token
			}
			a := s.req(t, hc, "GET", q, "", bearer(aliceToken)...)
			var p page
			if err := json.Unmarshal(a.body, &p); a.status != http.StatusOK || err != nil {
				t.Fatalf("%s: %d %s", q, a.status, a.body)
			}
			pages = append(pages, p.names())
			if token = p.NextPageToken; token == "" {
				break
			}
			if raw, _ := base64.RawURLEncoding.DecodeString(token); strings.Contains(string(raw), "pg-b") || strings.Contains(string(raw), "pg-d") {
				t.Fatalf("%s: the token %q names a topic alice may not see", q, raw)
			}
		}
		if want := [][]string{{"pg-a"}, {"pg-c"}, {"pg-e"}}; !slices.EqualFunc(pages, want, slices.Equal) {
			t.Errorf("%s in pages of 1: %v, want %v", path, pages, want)
		}
	}
}

package gateway

import (
	"encoding/json"
	"net/http"
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

package gateway

import (
	"net/http"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// testReassign adds a partition and moves a replica set over REST, and
// checks the refusals' statuses.
func testReassign(t *testing.T, e *env) {
	var ct adminv1.CreateTopicsResponse
	e.call(http.MethodPost, "/v1/topics", `{"topics": [{"name": "moving", "assignments": [{"partition": 0, "replicas": [1, 2]}]}]}`, &ct)
	var cp adminv1.CreatePartitionsResponse
	e.call(http.MethodPost, "/v1/partitions", `{"topics": [{"name": "moving", "count": 2}]}`, &cp)
	if r := cp.GetResults(); len(r) != 1 || len(r[0].GetAssignments()) != 1 || len(r[0].GetAssignments()[0].GetReplicas()) != 2 {
		t.Fatalf("create partitions: %v", &cp)
	}
	e.r.fails(http.MethodPost, "/v1/partitions", `{"topics": [{"name": "moving", "count": 1}]}`, http.StatusBadRequest, "INVALID_PARTITIONS")

	var ar adminv1.AlterPartitionReassignmentsResponse
	e.call(http.MethodPost, "/v1/reassignments", `{"partitions": [{"topic": "moving", "partition": 0, "replicas": [3, 1, 2]}]}`, &ar)
	if r := ar.GetResults(); len(r) != 1 || r[0].GetErrorCode() != 0 {
		t.Fatalf("reassign: %v", &ar)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var list adminv1.ListPartitionReassignmentsResponse
		e.call(http.MethodGet, "/v1/reassignments", nil, &list)
		d := describe(t, e, "topics=moving")
		if len(list.GetReassignments()) == 0 && slices.Equal(d.GetTopics()[0].GetPartitions()[0].GetReplicas(), []int32{3, 1, 2}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the move did not finish: %v %v", &list, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.r.fails(http.MethodPost, "/v1/reassignments", `{"partitions": [{"topic": "moving", "partition": 0}]}`,
		http.StatusConflict, "NO_REASSIGNMENT_IN_PROGRESS")
	e.r.fails(http.MethodPost, "/v1/reassignments", `{"partitions": [{"topic": "moving", "partition": 0, "replicas": [1, 9]}]}`,
		http.StatusBadRequest, "INVALID_REPLICA_ASSIGNMENT")
	var del adminv1.DeleteTopicsResponse
	e.call(http.MethodPost, "/v1/topics:delete", `{"topics": ["moving"], "timeoutMs": 5000}`, &del)
}

// Listing the reassignments of a partition that does not exist answers at
// once: a name that can never exist is 400 naming its field, a topic the
// controller does not know 404. The controller's answer for the whole
// list, UNKNOWN_TOPIC_OR_PARTITION, was retried for the whole retry
// budget (15 s by default) before the 404, and named no field.
func TestRESTListingReassignmentsOfAnUnknownPartitionAnswersAtOnce(t *testing.T) {
	tc := startCluster(t)
	// A budget far beyond the caller's deadline below: an answer within
	// the deadline was not waited out.
	g := startGateway(t, tc, func(o *Options) { o.RetryTimeout = 2 * time.Minute })
	api := newREST(t, g)
	api.hc.Timeout = 30 * time.Second
	tc.CreateTopic("listed", 1, 3, nil)
	api.ok(http.MethodGet, "/v1/reassignments", nil, nil)
	cases := []struct {
		body        string
		status      int
		name, field string
	}{
		{`{"partitions": [{"topic": "listed", "partition": 0}, {"topic": "", "partition": 0}]}`,
			http.StatusBadRequest, "INVALID_TOPIC_EXCEPTION", "partitions[1].topic"},
		{`{"partitions": [{"topic": "listed", "partition": -1}]}`,
			http.StatusBadRequest, "INVALID_PARTITIONS", "partitions[0].partition"},
		{`{"partitions": [{"topic": "no-such-topic", "partition": 0}]}`,
			http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION", ""},
	}
	for _, c := range cases {
		got := api.fails(http.MethodPost, "/v1/reassignments:list", c.body, c.status, c.name)
		if got.Field != c.field {
			t.Errorf("%s: field %q (%s), want %q", c.body, got.Field, got.Message, c.field)
		}
	}
	var list adminv1.ListPartitionReassignmentsResponse
	api.ok(http.MethodPost, "/v1/reassignments:list", `{"partitions": [{"topic": "listed", "partition": 0}]}`, &list)
	if len(list.GetReassignments()) != 0 {
		t.Fatalf("listed-0 is not being moved: %v", &list)
	}
}

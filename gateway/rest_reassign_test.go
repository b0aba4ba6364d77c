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

package gateway

import (
	"fmt"
	"net/http"
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
)

// testGroups drives the group routes: the gateway finds each group's
// coordinator (the controller creates __consumer_offsets on the first
// FindCoordinator), commits from outside the group, reads offsets and lag,
// resets, describes, lists and deletes; bad input answers 4xx JSON.
func testGroups(t *testing.T, e *env) {
	var created adminv1.CreateTopicsResponse
	e.call(http.MethodPost, "/v1/topics", `{"topics": [{"name": "lagged", "numPartitions": 1, "replicationFactor": 3}], "timeoutMs": 10000}`, &created)
	if r := created.GetResults(); len(r) != 1 || r[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v", &created)
	}
	var p brokerv1.ProduceResponse
	e.call(http.MethodPost, "/v1/topics/lagged/partitions/0/records", produceBody(-1, "a", "b", "c"), &p)

	var found groupv1.FindCoordinatorResponse
	e.call(http.MethodGet, "/v1/groups/rest-app/coordinator", nil, &found)
	if found.GetCoordinator().GetId() < 1 || found.GetCoordinator().GetAddress() == "" {
		t.Fatalf("coordinator: %v", &found)
	}
	var committed groupv1.OffsetCommitResponse
	e.call(http.MethodPost, "/v1/groups/rest-app/offsets",
		`{"generationId": -1, "topics": [{"name": "lagged", "partitions": [{"partition": 0, "committedOffset": 1, "committedLeaderEpoch": -1}]}]}`, &committed)
	if ps := committed.GetTopics()[0].GetPartitions(); len(ps) != 1 || ps[0].GetErrorCode() != 0 {
		t.Fatalf("commit: %v", &committed)
	}
	var fetched groupv1.OffsetFetchResponse
	e.call(http.MethodGet, "/v1/groups/rest-app/offsets", nil, &fetched)
	if ts := fetched.GetTopics(); len(ts) != 1 || ts[0].GetPartitions()[0].GetCommittedOffset() != 1 {
		t.Fatalf("offsets: %v", &fetched)
	}
	var lag groupv1.DescribeGroupLagResponse
	e.call(http.MethodGet, "/v1/groups/rest-app/lag", nil, &lag)
	if ps := lag.GetPartitions(); len(ps) != 1 || ps[0].GetHighWatermark() != 3 || ps[0].GetLag() != 2 || lag.GetGroupState() != "Empty" {
		t.Fatalf("lag: %v", &lag)
	}
	var reset groupv1.ResetGroupOffsetsResponse
	e.call(http.MethodPost, "/v1/groups/rest-app/offsets:reset", `{"spec": "OFFSET_RESET_SPEC_LATEST", "topics": [{"name": "lagged"}]}`, &reset)
	if ps := reset.GetPartitions(); len(ps) != 1 || ps[0].GetPreviousOffset() != 1 || ps[0].GetNewOffset() != 3 {
		t.Fatalf("reset: %v", &reset)
	}
	var offDeleted groupv1.OffsetDeleteResponse
	e.call(http.MethodPost, "/v1/groups/rest-app/offsets:delete", `{"topics": [{"name": "lagged", "partitions": [0]}, {"name": "nope", "partitions": [0]}]}`, &offDeleted)
	if ts := offDeleted.GetTopics(); len(ts) != 2 || ts[0].GetPartitions()[0].GetErrorCode() != 0 ||
		ts[1].GetPartitions()[0].GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("offsets:delete: %v", &offDeleted)
	}
	e.call(http.MethodGet, "/v1/groups/rest-app/offsets", nil, &fetched)
	if ts := fetched.GetTopics(); len(ts) != 0 {
		t.Fatalf("offsets after offsets:delete: %v", &fetched)
	}
	e.r.fails(http.MethodPost, "/v1/groups/no-such-group/offsets:delete", `{"topics": [{"name": "lagged", "partitions": [0]}]}`, http.StatusNotFound, "GROUP_ID_NOT_FOUND")
	e.call(http.MethodPost, "/v1/groups/rest-app/offsets",
		`{"generationId": -1, "topics": [{"name": "lagged", "partitions": [{"partition": 0, "committedOffset": 3, "committedLeaderEpoch": -1}]}]}`, &committed)
	var listed groupv1.ListGroupsResponse
	e.call(http.MethodGet, "/v1/groups", nil, &listed)
	seen := false
	for _, g := range listed.GetGroups() {
		seen = seen || g.GetGroupId() == "rest-app"
	}
	if !seen {
		t.Fatalf("list: %v", &listed)
	}
	var described groupv1.DescribeGroupsResponse
	e.call(http.MethodPost, "/v1/groups:describe", `{"groupIds": ["rest-app"]}`, &described)
	if d := described.GetGroups(); len(d) != 1 || d[0].GetGroupState() != "Empty" || d[0].GetErrorCode() != 0 {
		t.Fatalf("describe: %v", &described)
	}

	e.r.fails(http.MethodPost, "/v1/groups/rest-app/members:join",
		`{"sessionTimeoutMs": 1, "protocolType": "consumer", "protocols": [{"name": "range"}]}`, http.StatusBadRequest, "INVALID_SESSION_TIMEOUT")
	e.r.fails(http.MethodPost, "/v1/groups/rest-app/offsets:reset", `{"topics": [{"name": "lagged"}]}`, http.StatusBadRequest, "INVALID_REQUEST")
	e.r.fails(http.MethodPost, "/v1/groups/rest-app/members:heartbeat", `{"generationId": 1, "memberId": "nobody"}`, http.StatusConflict, "UNKNOWN_MEMBER_ID")

	// A member over REST: MEMBER_ID_REQUIRED carries the id to come back
	// with (KIP-394), then join, sync, heartbeat, leave.
	join := `{"sessionTimeoutMs": 10000, "protocolType": "consumer", "protocols": [{"name": "range", "metadata": "c3Vi"}], "clientId": "curl"}`
	eb := e.r.fails(http.MethodPost, "/v1/groups/rest-member/members:join", join, http.StatusConflict, "MEMBER_ID_REQUIRED")
	if eb.MemberID == "" {
		t.Fatalf("MEMBER_ID_REQUIRED without memberId: %+v", eb)
	}
	var joined groupv1.JoinGroupResponse
	e.call(http.MethodPost, "/v1/groups/rest-member/members:join",
		`{"memberId": "`+eb.MemberID+`", "sessionTimeoutMs": 10000, "protocolType": "consumer", "protocols": [{"name": "range", "metadata": "c3Vi"}], "clientId": "curl"}`, &joined)
	if joined.GetMemberId() != eb.MemberID || joined.GetLeader() != eb.MemberID || joined.GetGenerationId() != 1 {
		t.Fatalf("join: %v", &joined)
	}
	gen := fmt.Sprint(joined.GetGenerationId())
	var synced groupv1.SyncGroupResponse
	e.call(http.MethodPost, "/v1/groups/rest-member/members:sync",
		`{"generationId": `+gen+`, "memberId": "`+eb.MemberID+`", "assignments": [{"memberId": "`+eb.MemberID+`", "assignment": "YWxs"}]}`, &synced)
	if string(synced.GetAssignment()) != "all" {
		t.Fatalf("sync: %v", &synced)
	}
	e.call(http.MethodPost, "/v1/groups/rest-member/members:heartbeat", `{"generationId": `+gen+`, "memberId": "`+eb.MemberID+`"}`, nil)
	e.r.fails(http.MethodPost, "/v1/groups:delete", `{"groupIds": ["rest-member"]}`, http.StatusConflict, "NON_EMPTY_GROUP")
	var left groupv1.LeaveGroupResponse
	e.call(http.MethodPost, "/v1/groups/rest-member/members:leave", `{"members": [{"memberId": "`+eb.MemberID+`"}]}`, &left)
	if m := left.GetMembers(); len(m) != 1 || m[0].GetErrorCode() != 0 {
		t.Fatalf("leave: %v", &left)
	}

	var deleted groupv1.DeleteGroupsResponse
	e.call(http.MethodPost, "/v1/groups:delete", `{"groupIds": ["rest-app", "never-was"]}`, &deleted)
	if r := deleted.GetResults(); len(r) != 2 || r[0].GetErrorCode() != 0 || r[1].GetErrorCode().String() != "ERROR_CODE_GROUP_ID_NOT_FOUND" {
		t.Fatalf("delete: %v", &deleted)
	}
	e.call(http.MethodGet, "/v1/groups/rest-app/offsets", nil, &fetched)
	if len(fetched.GetTopics()) != 0 {
		t.Fatalf("offsets after delete: %v", &fetched)
	}
}

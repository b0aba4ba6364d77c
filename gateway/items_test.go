package gateway

import (
	"testing"

	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// A batched admin call every item of which is refused answers the first
// refusal naming the request's item it is about, as creating topics does:
// configs (describe and alter, a topic and a broker of one name told
// apart), elections, reassignments, quota alterations and SCRAM
// alterations named none.
func TestBatchedRefusalsNameTheirItem(t *testing.T) {
	const refused = commonv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
	topic1 := &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "1"}
	broker1 := &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: "1"}
	user := func(name string) []*adminv1.ClientQuotaEntityPart {
		return []*adminv1.ClientQuotaEntityPart{{EntityType: "user", EntityName: proto.String(name)}}
	}
	cases := []struct {
		what string
		err  error // what the gateway answers
		want string
	}{
		{"describe configs", allFailed(describeConfigOutcomes(&adminv1.DescribeConfigsRequest{
			Resources: []*adminv1.ConfigResource{topic1, broker1}})(&adminv1.DescribeConfigsResponse{
			Results: []*adminv1.ConfigDescription{{Resource: broker1, ErrorCode: refused}, {Resource: topic1, ErrorCode: refused}}})),
			"resources[1]"},
		{"alter configs", allFailed(alterConfigOutcomes(&adminv1.AlterConfigsRequest{
			Resources: []*adminv1.AlterConfigsResource{{Resource: topic1}, {Resource: broker1}}})(&adminv1.AlterConfigsResponse{
			Results: []*adminv1.AlterConfigsResult{{Resource: broker1, ErrorCode: refused}}})),
			"resources[1]"},
		{"elect leaders", allFailed(electOutcomes(&adminv1.ElectLeadersRequest{
			Partitions: []*commonv1.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}})(&adminv1.ElectLeadersResponse{
			Results: []*adminv1.ElectLeadersResult{{Topic: "a", Partition: 1, ErrorCode: refused}}})),
			"partitions[1]"},
		{"reassign", allFailed(reassignOutcomes(&adminv1.AlterPartitionReassignmentsRequest{
			Partitions: []*adminv1.ReassignablePartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 0}}})(&adminv1.AlterPartitionReassignmentsResponse{
			Results: []*adminv1.ReassignmentResult{{Topic: "b", Partition: 0, ErrorCode: refused}}})),
			"partitions[1]"},
		{"alter quotas", allFailed(alterQuotaOutcomes(&adminv1.AlterClientQuotasRequest{
			Entries: []*adminv1.ClientQuotaAlteration{{Entity: user("alice")}, {Entity: user("bob")}}})(&adminv1.AlterClientQuotasResponse{
			Results: []*adminv1.AlterClientQuotasResult{{Entity: user("bob"), ErrorCode: refused}}})),
			"entries[1]"},
		{"alter scram", allFailed(alterScramOutcomes(&adminv1.AlterUserScramCredentialsRequest{
			Deletions:  []*adminv1.ScramCredentialDeletion{{User: "alice"}},
			Upsertions: []*adminv1.ScramCredentialUpsertion{{User: "alice"}, {User: "bob"}}})(&adminv1.AlterUserScramCredentialsResponse{
			Results: []*adminv1.AlterUserScramCredentialsResult{{User: "bob", ErrorCode: refused}, {User: "alice", ErrorCode: refused}}})),
			"upsertions[1]"},
		{"elect all partitions", allFailed(electOutcomes(&adminv1.ElectLeadersRequest{AllPartitions: true})(&adminv1.ElectLeadersResponse{
			Results: []*adminv1.ElectLeadersResult{{Topic: "a", Partition: 1, ErrorCode: refused}}})),
			""},
	}
	for _, c := range cases {
		ke := kerr.As(c.err)
		if ke == nil || ke.Code != kerr.InvalidRequest {
			t.Errorf("%s: %v, want the item's INVALID_REQUEST", c.what, c.err)
			continue
		}
		if ke.Field != c.want {
			t.Errorf("%s: field %q, want %q", c.what, ke.Field, c.want)
		}
	}
}

package gateway

import (
	"fmt"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// outcome is one item of a batched admin answer: a topic created, a config
// altered, a partition's election.
type outcome struct {
	code    commonv1.ErrorCode
	message string
	subject string
}

// checked passes an admin answer on, or, when none of its items succeeded,
// the first item's error instead: a REST caller who created one topic that
// already exists gets 409, not 200 with a code inside. Answers with at
// least one success stay 200 with the per-item codes.
func checked[R any](resp R, err error, outcomes func(R) []outcome) (R, error) {
	if err != nil {
		var zero R
		return zero, err
	}
	if err := allFailed(outcomes(resp)); err != nil {
		var zero R
		return zero, err
	}
	return resp, nil
}

func allFailed(items []outcome) error {
	if len(items) == 0 {
		return nil
	}
	for _, it := range items {
		// ELECTION_NOT_NEEDED means the leader is already the one asked for.
		if c := kerr.Code(it.code); c == kerr.None || c == kerr.ElectionNotNeeded {
			return nil
		}
	}
	it := items[0]
	msg := it.message
	if msg == "" {
		msg = fmt.Sprintf("%s: %s", it.subject, kerr.Code(it.code))
	}
	return &kerr.Error{Code: kerr.Code(it.code), Message: msg}
}

func createOutcomes(r *adminv1.CreateTopicsResponse) []outcome {
	var out []outcome
	for _, t := range r.GetResults() {
		out = append(out, outcome{t.GetErrorCode(), t.GetErrorMessage(), "topic " + t.GetName()})
	}
	return out
}

func deleteOutcomes(r *adminv1.DeleteTopicsResponse) []outcome {
	var out []outcome
	for _, t := range r.GetResults() {
		out = append(out, outcome{t.GetErrorCode(), t.GetErrorMessage(), "topic " + t.GetName()})
	}
	return out
}

func describeOutcomes(r *adminv1.DescribeTopicsResponse) []outcome {
	var out []outcome
	for _, t := range r.GetTopics() {
		out = append(out, outcome{t.GetErrorCode(), t.GetErrorMessage(), "topic " + t.GetName()})
	}
	return out
}

func describeConfigOutcomes(r *adminv1.DescribeConfigsResponse) []outcome {
	var out []outcome
	for _, c := range r.GetResults() {
		out = append(out, outcome{c.GetErrorCode(), c.GetErrorMessage(), resourceName(c.GetResource())})
	}
	return out
}

func alterConfigOutcomes(r *adminv1.AlterConfigsResponse) []outcome {
	var out []outcome
	for _, c := range r.GetResults() {
		out = append(out, outcome{c.GetErrorCode(), c.GetErrorMessage(), resourceName(c.GetResource())})
	}
	return out
}

func electOutcomes(r *adminv1.ElectLeadersResponse) []outcome {
	var out []outcome
	for _, e := range r.GetResults() {
		out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), fmt.Sprintf("partition %s-%d", e.GetTopic(), e.GetPartition())})
	}
	return out
}

func resourceName(r *adminv1.ConfigResource) string {
	if r.GetType() == adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER {
		return "broker " + r.GetName()
	}
	return "topic " + r.GetName()
}

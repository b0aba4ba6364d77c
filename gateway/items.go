package gateway

import (
	"fmt"
	"slices"

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
	field   string // the request's item it answers ("topics[2]"), when known
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
	return &kerr.Error{Code: kerr.Code(it.code), Message: msg, Field: it.field}
}

// itemField names the item called name in a request's list ("topics[2]"),
// so that a refusal names the field as a bad input does; "" when no item
// has that name.
func itemField(list string, names []string, name string) string {
	if i := slices.Index(names, name); i >= 0 {
		return fmt.Sprintf("%s[%d]", list, i)
	}
	return ""
}

// specNames are the names of a CreateTopics request's topics.
func specNames(req *adminv1.CreateTopicsRequest) []string {
	var names []string
	for _, t := range req.GetTopics() {
		names = append(names, t.GetName())
	}
	return names
}

func createOutcomes(req *adminv1.CreateTopicsRequest) func(*adminv1.CreateTopicsResponse) []outcome {
	names := specNames(req)
	return func(r *adminv1.CreateTopicsResponse) []outcome {
		var out []outcome
		for _, t := range r.GetResults() {
			out = append(out, outcome{t.GetErrorCode(), t.GetErrorMessage(), "topic " + t.GetName(), itemField("topics", names, t.GetName())})
		}
		return out
	}
}

func deleteOutcomes(req *adminv1.DeleteTopicsRequest) func(*adminv1.DeleteTopicsResponse) []outcome {
	return func(r *adminv1.DeleteTopicsResponse) []outcome {
		var out []outcome
		for _, t := range r.GetResults() {
			out = append(out, outcome{t.GetErrorCode(), t.GetErrorMessage(), "topic " + t.GetName(), itemField("topics", req.GetTopics(), t.GetName())})
		}
		return out
	}
}

func describeOutcomes(req *adminv1.DescribeTopicsRequest) func(*adminv1.DescribeTopicsResponse) []outcome {
	return func(r *adminv1.DescribeTopicsResponse) []outcome {
		var out []outcome
		for _, t := range r.GetTopics() {
			out = append(out, outcome{t.GetErrorCode(), t.GetErrorMessage(), "topic " + t.GetName(), itemField("topics", req.GetTopics(), t.GetName())})
		}
		return out
	}
}

func describeConfigOutcomes(req *adminv1.DescribeConfigsRequest) func(*adminv1.DescribeConfigsResponse) []outcome {
	return func(r *adminv1.DescribeConfigsResponse) []outcome {
		var out []outcome
		for _, c := range r.GetResults() {
			field := itemFieldBy("resources", req.GetResources(), resourceKeyOf, resourceKeyOf(c.GetResource()))
			out = append(out, outcome{c.GetErrorCode(), c.GetErrorMessage(), resourceName(c.GetResource()), field})
		}
		return out
	}
}

func alterConfigOutcomes(req *adminv1.AlterConfigsRequest) func(*adminv1.AlterConfigsResponse) []outcome {
	keyOf := func(a *adminv1.AlterConfigsResource) resourceKey { return resourceKeyOf(a.GetResource()) }
	return func(r *adminv1.AlterConfigsResponse) []outcome {
		var out []outcome
		for _, c := range r.GetResults() {
			field := itemFieldBy("resources", req.GetResources(), keyOf, resourceKeyOf(c.GetResource()))
			out = append(out, outcome{c.GetErrorCode(), c.GetErrorMessage(), resourceName(c.GetResource()), field})
		}
		return out
	}
}

func electOutcomes(req *adminv1.ElectLeadersRequest) func(*adminv1.ElectLeadersResponse) []outcome {
	keyOf := func(tp *commonv1.TopicPartition) partitionKey { return partitionKey{tp.GetTopic(), tp.GetPartition()} }
	return func(r *adminv1.ElectLeadersResponse) []outcome {
		var out []outcome
		for _, e := range r.GetResults() {
			// All partitions (all_partitions) name none in the request: no field.
			field := itemFieldBy("partitions", req.GetPartitions(), keyOf, partitionKey{e.GetTopic(), e.GetPartition()})
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), fmt.Sprintf("partition %s-%d", e.GetTopic(), e.GetPartition()), field})
		}
		return out
	}
}

// itemFieldBy is itemField for items known by a key other than a plain
// name (a config resource's type and name, a partition): list[i] of the
// first item whose key is key, "" when none.
func itemFieldBy[T any, K comparable](list string, items []T, keyOf func(T) K, key K) string {
	for i, it := range items {
		if keyOf(it) == key {
			return fmt.Sprintf("%s[%d]", list, i)
		}
	}
	return ""
}

// resourceKey tells config resources apart: a topic and a broker may share
// a name ("1").
type resourceKey struct {
	typ  adminv1.ConfigResourceType
	name string
}

func resourceKeyOf(r *adminv1.ConfigResource) resourceKey {
	return resourceKey{r.GetType(), r.GetName()}
}

// partitionKey is a partition named in a request or an answer.
type partitionKey struct {
	topic     string
	partition int32
}

func resourceName(r *adminv1.ConfigResource) string {
	if r.GetType() == adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER {
		return "broker " + r.GetName()
	}
	return "topic " + r.GetName()
}

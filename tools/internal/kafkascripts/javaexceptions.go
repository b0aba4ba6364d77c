package kafkascripts

import "strings"

// exceptionClass is the Java client's exception class for a Kafka error
// name (kerr's Message, e.g. NON_EMPTY_GROUP): Kafka's own name where it is
// not the name spelled in camel case, else that spelling.
func exceptionClass(name string) string {
	if c, ok := exceptionClasses[name]; ok {
		return c
	}
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		if w != "" {
			b.WriteString(w[:1] + strings.ToLower(w[1:]))
		}
	}
	return b.String() + "Exception"
}

// exceptionClasses are the codes whose Java exception is not their name
// in camel case.
var exceptionClasses = map[string]string{
	"MESSAGE_TOO_LARGE":            "RecordTooLargeException",
	"RECORD_LIST_TOO_LARGE":        "RecordBatchTooLargeException",
	"TOPIC_AUTHORIZATION_FAILED":   "TopicAuthorizationException",
	"CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
	"GROUP_AUTHORIZATION_FAILED":   "GroupAuthorizationException",
	"REQUEST_TIMED_OUT":            "TimeoutException",
	"NOT_LEADER_OR_FOLLOWER":       "NotLeaderOrFollowerException",
	"CORRUPT_MESSAGE":              "CorruptRecordException",
	"NON_EMPTY_GROUP":              "GroupNotEmptyException",
	"GROUP_ID_NOT_FOUND":           "GroupIdNotFoundException",
	"INVALID_GROUP_ID":             "InvalidGroupIdException",
	"COORDINATOR_NOT_AVAILABLE":    "CoordinatorNotAvailableException",
	"NOT_COORDINATOR":              "NotCoordinatorException",
	"UNKNOWN_TOPIC_OR_PARTITION":   "UnknownTopicOrPartitionException",
	"GROUP_SUBSCRIBED_TO_TOPIC":    "GroupSubscribedToTopicException",
	"COORDINATOR_LOAD_IN_PROGRESS": "CoordinatorLoadInProgressException",
	"NOT_ENOUGH_REPLICAS":          "NotEnoughReplicasException",
}

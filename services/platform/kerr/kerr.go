// Package kerr is tidemark's one error table: Kafka-style error codes and,
// for each, whether a client may retry it, whether to refresh metadata
// first, whether the gateway reroutes it, and the HTTP and gRPC statuses it
// travels as.
//
// The numeric values are Kafka's own protocol error codes, so an operator who
// knows Kafka recognises them; the protobuf enum tidemark.common.v1.ErrorCode
// mirrors this table value for value (a test keeps the two in step).
package kerr

import (
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Code is a Kafka protocol error code. The zero value means "no error".
type Code int16

// The codes tidemark uses. Values are Kafka's.
const (
	UnknownServerError           Code = -1
	None                         Code = 0
	OffsetOutOfRange             Code = 1
	CorruptMessage               Code = 2
	UnknownTopicOrPartition      Code = 3
	LeaderNotAvailable           Code = 5
	NotLeaderOrFollower          Code = 6
	RequestTimedOut              Code = 7
	BrokerNotAvailable           Code = 8
	ReplicaNotAvailable          Code = 9
	MessageTooLarge              Code = 10
	StaleControllerEpoch         Code = 11
	OffsetMetadataTooLarge       Code = 12
	NetworkException             Code = 13
	CoordinatorLoadInProgress    Code = 14
	CoordinatorNotAvailable      Code = 15
	NotCoordinator               Code = 16
	InvalidTopicException        Code = 17
	RecordListTooLarge           Code = 18
	NotEnoughReplicas            Code = 19
	NotEnoughReplicasAfterAppend Code = 20
	InvalidRequiredAcks          Code = 21
	IllegalGeneration            Code = 22
	InconsistentGroupProtocol    Code = 23
	InvalidGroupID               Code = 24
	UnknownMemberID              Code = 25
	InvalidSessionTimeout        Code = 26
	RebalanceInProgress          Code = 27
	InvalidCommitOffsetSize      Code = 28
	TopicAuthorizationFailed     Code = 29
	GroupAuthorizationFailed     Code = 30
	ClusterAuthorizationFailed   Code = 31
	InvalidTimestamp             Code = 32
	UnsupportedSaslMechanism     Code = 33
	IllegalSaslState             Code = 34
	UnsupportedVersion           Code = 35
	TopicAlreadyExists           Code = 36
	InvalidPartitions            Code = 37
	InvalidReplicationFactor     Code = 38
	InvalidReplicaAssignment     Code = 39
	InvalidConfig                Code = 40
	NotController                Code = 41
	InvalidRequest               Code = 42
	PolicyViolation              Code = 44
	OutOfOrderSequenceNumber     Code = 45
	DuplicateSequenceNumber      Code = 46
	InvalidProducerEpoch         Code = 47
	KafkaStorageError            Code = 56
	SaslAuthenticationFailed     Code = 58
	UnknownProducerID            Code = 59
	ReassignmentInProgress       Code = 60
	NonEmptyGroup                Code = 68
	GroupIDNotFound              Code = 69
	FetchSessionIDNotFound       Code = 70
	FencedLeaderEpoch            Code = 74
	UnknownLeaderEpoch           Code = 75
	StaleBrokerEpoch             Code = 77
	OffsetNotAvailable           Code = 78
	MemberIDRequired             Code = 79
	PreferredLeaderNotAvailable  Code = 80
	GroupMaxSizeReached          Code = 81
	FencedInstanceID             Code = 82
	EligibleLeadersNotAvailable  Code = 83
	ElectionNotNeeded            Code = 84
	NoReassignmentInProgress     Code = 85
	GroupSubscribedToTopic       Code = 86
	InvalidRecord                Code = 87
	UnstableOffsetCommit         Code = 88
	ThrottlingQuotaExceeded      Code = 89
	ResourceNotFound             Code = 91
	DuplicateResource            Code = 92
	UnacceptableCredential       Code = 93
	InvalidUpdateVersion         Code = 95
	UnknownTopicID               Code = 100
	DuplicateBrokerRegistration  Code = 101
	BrokerIDNotRegistered        Code = 102
	InconsistentTopicID          Code = 103
	IneligibleReplica            Code = 107
	NewLeaderElected             Code = 108
)

// Info is one row of the table: every decision about a code is made here,
// and the client, gateway, console and CLI look it up rather than keep
// their own lists.
type Info struct {
	Name string
	// Retriable: the same request may succeed if sent again (Kafka's
	// RetriableException).
	Retriable bool
	// RefreshMetadata: the sender's idea of who leads (or which controller
	// is active) is probably stale; refresh it before retrying (Kafka's
	// InvalidMetadataException, plus NOT_CONTROLLER, after which Kafka's
	// admin client also refreshes).
	RefreshMetadata bool
	// Reroute: the gateway looks up the leader or controller again and
	// retries within its budget, because the leader moved, the controller
	// changed or the node could not be reached. Other retriable answers
	// (NOT_ENOUGH_REPLICAS, timeouts) go back to the REST caller at once
	// with Retry-After: retrying them inside the gateway would hide the
	// cluster's state, and a produce that timed out after its append would
	// be written twice.
	Reroute bool
	// HTTP is the status REST and the console answer with.
	HTTP int
	// GRPC is the status code the error travels as.
	GRPC codes.Code
}

// Shorthands for the table's boolean columns.
const (
	final   = 0         // not retriable
	retry   = 1 << iota // retriable as it is
	refresh             // retriable after a metadata refresh
	reroute             // the gateway retries on a fresh route
)

func row(name string, policy int, httpStatus int, grpc codes.Code) Info {
	return Info{
		Name:            name,
		Retriable:       policy&(retry|refresh|reroute) != 0,
		RefreshMetadata: policy&refresh != 0,
		Reroute:         policy&reroute != 0,
		HTTP:            httpStatus,
		GRPC:            grpc,
	}
}

// table is the single mapping from code to policy. Retriable and
// RefreshMetadata follow Kafka's exception classes (noted where tidemark
// differs). HTTP: 404 unknown topic or partition, 409 a conflict with the
// cluster's state, 413 too large, 503 (with Retry-After) what a retry may
// fix, 504 timed out, 400 the rest of bad input.
var table = map[Code]Info{
	UnknownServerError: row("UNKNOWN_SERVER_ERROR", final, http.StatusInternalServerError, codes.Internal),
	None:               row("NONE", final, http.StatusOK, codes.OK),
	OffsetOutOfRange:   row("OFFSET_OUT_OF_RANGE", final, http.StatusBadRequest, codes.OutOfRange),
	// CorruptRecordException is retriable: the batch was damaged on the way.
	CorruptMessage: row("CORRUPT_MESSAGE", retry, http.StatusServiceUnavailable, codes.DataLoss),
	// Retriable and a metadata error in Kafka; the gateway does not reroute
	// on it because the metadata's own answer is final (route.go retries
	// only when a named leader has not heard of the partition yet).
	UnknownTopicOrPartition: row("UNKNOWN_TOPIC_OR_PARTITION", refresh, http.StatusNotFound, codes.NotFound),
	LeaderNotAvailable:      row("LEADER_NOT_AVAILABLE", refresh|reroute, http.StatusServiceUnavailable, codes.Unavailable),
	NotLeaderOrFollower:     row("NOT_LEADER_OR_FOLLOWER", refresh|reroute, http.StatusServiceUnavailable, codes.FailedPrecondition),
	RequestTimedOut:         row("REQUEST_TIMED_OUT", retry, http.StatusGatewayTimeout, codes.DeadlineExceeded),
	// A new leader whose high watermark has not yet reached the start of
	// its epoch cannot tell where the log ends (KIP-320): ask again.
	OffsetNotAvailable: row("OFFSET_NOT_AVAILABLE", retry, http.StatusServiceUnavailable, codes.Unavailable),
	// BrokerNotAvailableException is not retriable in Kafka; tidemark uses
	// it for a stopping gateway, which a caller retries elsewhere: 503.
	BrokerNotAvailable:           row("BROKER_NOT_AVAILABLE", final, http.StatusServiceUnavailable, codes.Unavailable),
	ReplicaNotAvailable:          row("REPLICA_NOT_AVAILABLE", refresh|reroute, http.StatusServiceUnavailable, codes.Unavailable),
	MessageTooLarge:              row("MESSAGE_TOO_LARGE", final, http.StatusRequestEntityTooLarge, codes.InvalidArgument),
	StaleControllerEpoch:         row("STALE_CONTROLLER_EPOCH", final, http.StatusConflict, codes.FailedPrecondition),
	NetworkException:             row("NETWORK_EXCEPTION", refresh|reroute, http.StatusServiceUnavailable, codes.Unavailable),
	InvalidTopicException:        row("INVALID_TOPIC_EXCEPTION", final, http.StatusBadRequest, codes.InvalidArgument),
	RecordListTooLarge:           row("RECORD_LIST_TOO_LARGE", final, http.StatusRequestEntityTooLarge, codes.InvalidArgument),
	NotEnoughReplicas:            row("NOT_ENOUGH_REPLICAS", retry, http.StatusServiceUnavailable, codes.Unavailable),
	NotEnoughReplicasAfterAppend: row("NOT_ENOUGH_REPLICAS_AFTER_APPEND", retry, http.StatusServiceUnavailable, codes.Unavailable),
	InvalidRequiredAcks:          row("INVALID_REQUIRED_ACKS", final, http.StatusBadRequest, codes.InvalidArgument),
	// Authorization failures: the caller is known but not allowed (403).
	TopicAuthorizationFailed:   row("TOPIC_AUTHORIZATION_FAILED", final, http.StatusForbidden, codes.PermissionDenied),
	ClusterAuthorizationFailed: row("CLUSTER_AUTHORIZATION_FAILED", final, http.StatusForbidden, codes.PermissionDenied),
	// tidemark's name for "no valid credentials" on every link (Kafka's
	// closest code): no certificate, a rejected one, a wrong token (401).
	SaslAuthenticationFailed: row("SASL_AUTHENTICATION_FAILED", final, http.StatusUnauthorized, codes.Unauthenticated),
	UnsupportedSaslMechanism: row("UNSUPPORTED_SASL_MECHANISM", final, http.StatusUnauthorized, codes.Unauthenticated),
	IllegalSaslState:         row("ILLEGAL_SASL_STATE", final, http.StatusBadRequest, codes.FailedPrecondition),
	ResourceNotFound:         row("RESOURCE_NOT_FOUND", final, http.StatusNotFound, codes.NotFound),
	DuplicateResource:        row("DUPLICATE_RESOURCE", final, http.StatusBadRequest, codes.InvalidArgument),
	UnacceptableCredential:   row("UNACCEPTABLE_CREDENTIAL", final, http.StatusBadRequest, codes.InvalidArgument),
	InvalidTimestamp:         row("INVALID_TIMESTAMP", final, http.StatusBadRequest, codes.InvalidArgument),
	UnsupportedVersion:       row("UNSUPPORTED_VERSION", final, http.StatusNotImplemented, codes.Unimplemented),
	TopicAlreadyExists:       row("TOPIC_ALREADY_EXISTS", final, http.StatusConflict, codes.AlreadyExists),
	InvalidPartitions:        row("INVALID_PARTITIONS", final, http.StatusBadRequest, codes.InvalidArgument),
	InvalidReplicationFactor: row("INVALID_REPLICATION_FACTOR", final, http.StatusBadRequest, codes.InvalidArgument),
	InvalidReplicaAssignment: row("INVALID_REPLICA_ASSIGNMENT", final, http.StatusBadRequest, codes.InvalidArgument),
	InvalidConfig:            row("INVALID_CONFIG", final, http.StatusBadRequest, codes.InvalidArgument),
	// NotControllerException is a plain RetriableException; Kafka's admin
	// client still clears its controller and refreshes, and so do we.
	NotController:            row("NOT_CONTROLLER", refresh|reroute, http.StatusServiceUnavailable, codes.FailedPrecondition),
	InvalidRequest:           row("INVALID_REQUEST", final, http.StatusBadRequest, codes.InvalidArgument),
	PolicyViolation:          row("POLICY_VIOLATION", final, http.StatusForbidden, codes.PermissionDenied),
	OutOfOrderSequenceNumber: row("OUT_OF_ORDER_SEQUENCE_NUMBER", final, http.StatusConflict, codes.FailedPrecondition),
	DuplicateSequenceNumber:  row("DUPLICATE_SEQUENCE_NUMBER", final, http.StatusConflict, codes.AlreadyExists),
	InvalidProducerEpoch:     row("INVALID_PRODUCER_EPOCH", final, http.StatusConflict, codes.FailedPrecondition),
	KafkaStorageError:        row("KAFKA_STORAGE_ERROR", refresh|reroute, http.StatusServiceUnavailable, codes.Unavailable),
	UnknownProducerID:        row("UNKNOWN_PRODUCER_ID", final, http.StatusConflict, codes.FailedPrecondition),
	// Only the Kafka listener answers it: it keeps no fetch sessions, so a
	// client that asks for one starts again with full requests.
	FetchSessionIDNotFound: row("FETCH_SESSION_ID_NOT_FOUND", retry, http.StatusServiceUnavailable, codes.FailedPrecondition),
	// The sender's leader epoch is older than the leader's: its metadata is
	// stale (F3), so refresh and go again.
	FencedLeaderEpoch: row("FENCED_LEADER_EPOCH", refresh|reroute, http.StatusServiceUnavailable, codes.FailedPrecondition),
	// UnknownLeaderEpochException is a RetriableException but not a
	// metadata error in Kafka: the sender is ahead of the broker. tidemark
	// refreshes anyway: the sender's newer epoch may have come from a view
	// the cluster has since left (a broker that crashed, a hint), and
	// without a refresh the gateway kept producing on it after an ISR
	// shrink (TestREST/NotEnoughReplicas timed out instead of answering
	// NOT_ENOUGH_REPLICAS). A refresh costs one Metadata call.
	UnknownLeaderEpoch:          row("UNKNOWN_LEADER_EPOCH", refresh|reroute, http.StatusServiceUnavailable, codes.FailedPrecondition),
	StaleBrokerEpoch:            row("STALE_BROKER_EPOCH", final, http.StatusConflict, codes.FailedPrecondition),
	PreferredLeaderNotAvailable: row("PREFERRED_LEADER_NOT_AVAILABLE", refresh, http.StatusServiceUnavailable, codes.Unavailable),
	EligibleLeadersNotAvailable: row("ELIGIBLE_LEADERS_NOT_AVAILABLE", refresh, http.StatusServiceUnavailable, codes.Unavailable),
	// ElectionNotNeededException extends InvalidMetadataException in Kafka,
	// hence retriable there; it is a final per-partition answer to an
	// election (the leader is already the one asked for), so not here.
	ElectionNotNeeded: row("ELECTION_NOT_NEEDED", final, http.StatusConflict, codes.FailedPrecondition),
	// A partition being moved cannot change shape (CreatePartitions of its
	// topic); a cancel of a partition that is not moving. Both final, as in Kafka.
	ReassignmentInProgress:   row("REASSIGNMENT_IN_PROGRESS", final, http.StatusConflict, codes.FailedPrecondition),
	NoReassignmentInProgress: row("NO_REASSIGNMENT_IN_PROGRESS", final, http.StatusConflict, codes.FailedPrecondition),
	// A quota's bucket is empty: retry after the throttle time (429).
	ThrottlingQuotaExceeded:     row("THROTTLING_QUOTA_EXCEEDED", retry, http.StatusTooManyRequests, codes.ResourceExhausted),
	InvalidRecord:               row("INVALID_RECORD", final, http.StatusBadRequest, codes.InvalidArgument),
	InvalidUpdateVersion:        row("INVALID_UPDATE_VERSION", final, http.StatusConflict, codes.FailedPrecondition),
	UnknownTopicID:              row("UNKNOWN_TOPIC_ID", refresh, http.StatusNotFound, codes.NotFound), // an InvalidMetadataException in Kafka
	DuplicateBrokerRegistration: row("DUPLICATE_BROKER_REGISTRATION", final, http.StatusConflict, codes.AlreadyExists),
	BrokerIDNotRegistered:       row("BROKER_ID_NOT_REGISTERED", final, http.StatusConflict, codes.FailedPrecondition),
	// The request names the topic id the metadata has, the replica's log
	// another: a stray of the deleted topic not replaced yet. Retriable.
	InconsistentTopicID: row("INCONSISTENT_TOPIC_ID", refresh, http.StatusServiceUnavailable, codes.Unavailable),
	IneligibleReplica:   row("INELIGIBLE_REPLICA", final, http.StatusConflict, codes.FailedPrecondition),
	NewLeaderElected:    row("NEW_LEADER_ELECTED", final, http.StatusConflict, codes.FailedPrecondition),

	// Consumer groups. The coordinator codes are retriable: the group is
	// moving with the leadership of its __consumer_offsets partition. On
	// NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE a client finds the
	// coordinator again (Kafka marks the coordinator unknown); the gateway
	// does the same within its budget.
	CoordinatorLoadInProgress: row("COORDINATOR_LOAD_IN_PROGRESS", retry, http.StatusServiceUnavailable, codes.Unavailable),
	CoordinatorNotAvailable:   row("COORDINATOR_NOT_AVAILABLE", refresh|reroute, http.StatusServiceUnavailable, codes.Unavailable),
	NotCoordinator:            row("NOT_COORDINATOR", refresh|reroute, http.StatusServiceUnavailable, codes.FailedPrecondition),
	OffsetMetadataTooLarge:    row("OFFSET_METADATA_TOO_LARGE", final, http.StatusRequestEntityTooLarge, codes.InvalidArgument),
	InvalidCommitOffsetSize:   row("INVALID_COMMIT_OFFSET_SIZE", final, http.StatusBadRequest, codes.InvalidArgument),
	// The member's view of the group is stale: it rejoins (the client's
	// business, not a retry of the same request).
	IllegalGeneration:         row("ILLEGAL_GENERATION", final, http.StatusConflict, codes.FailedPrecondition),
	UnknownMemberID:           row("UNKNOWN_MEMBER_ID", final, http.StatusConflict, codes.FailedPrecondition),
	RebalanceInProgress:       row("REBALANCE_IN_PROGRESS", final, http.StatusConflict, codes.FailedPrecondition),
	FencedInstanceID:          row("FENCED_INSTANCE_ID", final, http.StatusConflict, codes.FailedPrecondition),
	MemberIDRequired:          row("MEMBER_ID_REQUIRED", final, http.StatusConflict, codes.FailedPrecondition),
	InconsistentGroupProtocol: row("INCONSISTENT_GROUP_PROTOCOL", final, http.StatusConflict, codes.FailedPrecondition),
	InvalidGroupID:            row("INVALID_GROUP_ID", final, http.StatusBadRequest, codes.InvalidArgument),
	InvalidSessionTimeout:     row("INVALID_SESSION_TIMEOUT", final, http.StatusBadRequest, codes.InvalidArgument),
	GroupAuthorizationFailed:  row("GROUP_AUTHORIZATION_FAILED", final, http.StatusForbidden, codes.PermissionDenied),
	NonEmptyGroup:             row("NON_EMPTY_GROUP", final, http.StatusConflict, codes.FailedPrecondition),
	GroupIDNotFound:           row("GROUP_ID_NOT_FOUND", final, http.StatusNotFound, codes.NotFound),
	GroupMaxSizeReached:       row("GROUP_MAX_SIZE_REACHED", final, http.StatusConflict, codes.ResourceExhausted),
	GroupSubscribedToTopic:    row("GROUP_SUBSCRIBED_TO_TOPIC", final, http.StatusConflict, codes.FailedPrecondition),
	// A commit of the partition is being written; ask again (KIP-447).
	UnstableOffsetCommit: row("UNSTABLE_OFFSET_COMMIT", retry, http.StatusServiceUnavailable, codes.Unavailable),
}

// Lookup returns the table entry for c. Unknown codes are reported as
// non-retriable internal errors named after their number.
func Lookup(c Code) Info {
	if in, ok := table[c]; ok {
		return in
	}
	return Info{Name: fmt.Sprintf("UNKNOWN_CODE_%d", int(c)), HTTP: http.StatusInternalServerError, GRPC: codes.Internal}
}

// Codes returns every code in the table, for tests and documentation.
func Codes() []Code {
	out := make([]Code, 0, len(table))
	for c := range table {
		out = append(out, c)
	}
	return out
}

func (c Code) String() string  { return Lookup(c).Name }
func (c Code) Retriable() bool { return Lookup(c).Retriable }

// RefreshMetadata reports whether the sender should refresh its metadata
// before retrying (see Info).
func (c Code) RefreshMetadata() bool { return Lookup(c).RefreshMetadata }

// Reroute reports whether the gateway retries on a fresh route (see Info).
func (c Code) Reroute() bool { return Lookup(c).Reroute }

// HTTPStatus is the status REST and the console answer c with.
func (c Code) HTTPStatus() int { return Lookup(c).HTTP }

// Error is an error carrying a Kafka-style code. Leader and Controller hints
// are filled in where the answer is NOT_LEADER_OR_FOLLOWER or NOT_CONTROLLER,
// so a client can go to the right node without a metadata round trip.
type Error struct {
	Code    Code
	Message string
	// Field names the request field that was wrong, when there is one.
	Field string
	// Leader is set on NOT_LEADER_OR_FOLLOWER and FENCED/UNKNOWN_LEADER_EPOCH.
	Leader *LeaderHint
	// Controller is set on NOT_CONTROLLER.
	Controller *NodeHint
	// Coordinator is set on NOT_COORDINATOR when the answering broker
	// knows the group's coordinator.
	Coordinator *NodeHint
	// MemberID is set on MEMBER_ID_REQUIRED: the id to join again with.
	MemberID string
	// Partial is what the call got done before it failed, travelling as a
	// second status detail: a DeleteRecords that timed out carries the low
	// watermark reached, as Kafka's answer carries it beside the error.
	Partial proto.Message
}

// LeaderHint names the current leader of a partition as the answering node knows it.
type LeaderHint struct {
	ID          int32
	Address     string
	LeaderEpoch int32
}

// NodeHint names a node (an active controller, say).
type NodeHint struct {
	ID      int32
	Address string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is lets errors.Is(err, kerr.NotLeaderOrFollower) style checks work via Code.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && t.Message == "" && t.Field == ""
	}
	return false
}

// New builds an *Error with a formatted message.
func New(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// BadField builds an *Error that names the request field that was wrong.
func BadField(c Code, field, format string, args ...any) *Error {
	return &Error{Code: c, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// Sentinel returns a bare *Error for c, for errors.Is comparisons.
func Sentinel(c Code) *Error { return &Error{Code: c} }

// CodeOf extracts the code from err: None for nil, the carried code for an
// *Error anywhere in the chain, UnknownServerError otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return None
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return UnknownServerError
}

// As returns the *Error in err's chain, or wraps err as UNKNOWN_SERVER_ERROR.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: UnknownServerError, Message: err.Error()}
}

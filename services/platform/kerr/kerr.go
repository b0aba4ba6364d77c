// Package kerr is tidemark's one error table: Kafka-style error codes, whether a
// client may retry them, and the gRPC status code each one travels as.
//
// The numeric values are Kafka's own protocol error codes, so an operator who
// knows Kafka recognises them; the protobuf enum tidemark.common.v1.ErrorCode
// mirrors this table value for value (a test keeps the two in step).
package kerr

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
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
	NetworkException             Code = 13
	InvalidTopicException        Code = 17
	RecordListTooLarge           Code = 18
	NotEnoughReplicas            Code = 19
	NotEnoughReplicasAfterAppend Code = 20
	InvalidRequiredAcks          Code = 21
	InvalidTimestamp             Code = 32
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
	UnknownProducerID            Code = 59
	FencedLeaderEpoch            Code = 74
	UnknownLeaderEpoch           Code = 75
	StaleBrokerEpoch             Code = 77
	PreferredLeaderNotAvailable  Code = 80
	EligibleLeadersNotAvailable  Code = 83
	ElectionNotNeeded            Code = 84
	InvalidRecord                Code = 87
	InvalidUpdateVersion         Code = 95
	DuplicateBrokerRegistration  Code = 101
	BrokerIDNotRegistered        Code = 102
	IneligibleReplica            Code = 107
	NewLeaderElected             Code = 108
)

// Info describes one code: its Kafka name, whether a client may retry the
// request as it is, and the gRPC status code the error travels as.
type Info struct {
	Name      string
	Retriable bool
	GRPC      codes.Code
}

// table is the single mapping from code to name, retriability and gRPC code.
// Retriable follows Kafka's RetriableException hierarchy.
var table = map[Code]Info{
	UnknownServerError:           {"UNKNOWN_SERVER_ERROR", false, codes.Internal},
	None:                         {"NONE", false, codes.OK},
	OffsetOutOfRange:             {"OFFSET_OUT_OF_RANGE", false, codes.OutOfRange},
	CorruptMessage:               {"CORRUPT_MESSAGE", true, codes.DataLoss},
	UnknownTopicOrPartition:      {"UNKNOWN_TOPIC_OR_PARTITION", true, codes.NotFound},
	LeaderNotAvailable:           {"LEADER_NOT_AVAILABLE", true, codes.Unavailable},
	NotLeaderOrFollower:          {"NOT_LEADER_OR_FOLLOWER", true, codes.FailedPrecondition},
	RequestTimedOut:              {"REQUEST_TIMED_OUT", true, codes.DeadlineExceeded},
	BrokerNotAvailable:           {"BROKER_NOT_AVAILABLE", false, codes.Unavailable},
	ReplicaNotAvailable:          {"REPLICA_NOT_AVAILABLE", true, codes.Unavailable},
	MessageTooLarge:              {"MESSAGE_TOO_LARGE", false, codes.InvalidArgument},
	StaleControllerEpoch:         {"STALE_CONTROLLER_EPOCH", false, codes.FailedPrecondition},
	NetworkException:             {"NETWORK_EXCEPTION", true, codes.Unavailable},
	InvalidTopicException:        {"INVALID_TOPIC_EXCEPTION", false, codes.InvalidArgument},
	RecordListTooLarge:           {"RECORD_LIST_TOO_LARGE", false, codes.InvalidArgument},
	NotEnoughReplicas:            {"NOT_ENOUGH_REPLICAS", true, codes.Unavailable},
	NotEnoughReplicasAfterAppend: {"NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, codes.Unavailable},
	InvalidRequiredAcks:          {"INVALID_REQUIRED_ACKS", false, codes.InvalidArgument},
	InvalidTimestamp:             {"INVALID_TIMESTAMP", false, codes.InvalidArgument},
	UnsupportedVersion:           {"UNSUPPORTED_VERSION", false, codes.Unimplemented},
	TopicAlreadyExists:           {"TOPIC_ALREADY_EXISTS", false, codes.AlreadyExists},
	InvalidPartitions:            {"INVALID_PARTITIONS", false, codes.InvalidArgument},
	InvalidReplicationFactor:     {"INVALID_REPLICATION_FACTOR", false, codes.InvalidArgument},
	InvalidReplicaAssignment:     {"INVALID_REPLICA_ASSIGNMENT", false, codes.InvalidArgument},
	InvalidConfig:                {"INVALID_CONFIG", false, codes.InvalidArgument},
	NotController:                {"NOT_CONTROLLER", true, codes.FailedPrecondition},
	InvalidRequest:               {"INVALID_REQUEST", false, codes.InvalidArgument},
	PolicyViolation:              {"POLICY_VIOLATION", false, codes.PermissionDenied},
	OutOfOrderSequenceNumber:     {"OUT_OF_ORDER_SEQUENCE_NUMBER", false, codes.FailedPrecondition},
	DuplicateSequenceNumber:      {"DUPLICATE_SEQUENCE_NUMBER", false, codes.AlreadyExists},
	InvalidProducerEpoch:         {"INVALID_PRODUCER_EPOCH", false, codes.FailedPrecondition},
	KafkaStorageError:            {"KAFKA_STORAGE_ERROR", true, codes.Unavailable},
	UnknownProducerID:            {"UNKNOWN_PRODUCER_ID", false, codes.FailedPrecondition},
	FencedLeaderEpoch:            {"FENCED_LEADER_EPOCH", true, codes.FailedPrecondition},
	UnknownLeaderEpoch:           {"UNKNOWN_LEADER_EPOCH", true, codes.FailedPrecondition},
	StaleBrokerEpoch:             {"STALE_BROKER_EPOCH", false, codes.FailedPrecondition},
	PreferredLeaderNotAvailable:  {"PREFERRED_LEADER_NOT_AVAILABLE", true, codes.Unavailable},
	EligibleLeadersNotAvailable:  {"ELIGIBLE_LEADERS_NOT_AVAILABLE", true, codes.Unavailable},
	ElectionNotNeeded:            {"ELECTION_NOT_NEEDED", false, codes.FailedPrecondition},
	InvalidRecord:                {"INVALID_RECORD", false, codes.InvalidArgument},
	InvalidUpdateVersion:         {"INVALID_UPDATE_VERSION", false, codes.FailedPrecondition},
	DuplicateBrokerRegistration:  {"DUPLICATE_BROKER_REGISTRATION", false, codes.AlreadyExists},
	BrokerIDNotRegistered:        {"BROKER_ID_NOT_REGISTERED", false, codes.FailedPrecondition},
	IneligibleReplica:            {"INELIGIBLE_REPLICA", false, codes.FailedPrecondition},
	NewLeaderElected:             {"NEW_LEADER_ELECTED", false, codes.FailedPrecondition},
}

// Lookup returns the table entry for c. Unknown codes are reported as
// non-retriable internal errors named after their number.
func Lookup(c Code) Info {
	if in, ok := table[c]; ok {
		return in
	}
	return Info{Name: fmt.Sprintf("UNKNOWN_CODE_%d", int(c)), GRPC: codes.Internal}
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

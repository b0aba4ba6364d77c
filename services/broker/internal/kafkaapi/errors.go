package kafkaapi

import (
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// Kafka's error codes are tidemark's (kerr's table holds Kafka's numbers),
// so an error travels as its code unchanged, whether it came from the
// broker's internals (*kerr.Error) or from the controller (a gRPC status
// with its ErrorDetail).
func code(err error) int16 {
	if err == nil {
		return 0
	}
	return int16(kerr.FromStatus(err).Code)
}

// message is err's text for the answers that carry one.
func message(err error) *string {
	if err == nil {
		return nil
	}
	ke := kerr.FromStatus(err)
	m := ke.Message
	if m == "" {
		m = ke.Code.String()
	}
	return &m
}

// protoCode is a code carried in a protobuf answer.
func protoCode(c commonv1.ErrorCode) int16 { return int16(c) }

func optMessage(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ErrorCode is err's Kafka error code, for Extensions' answers.
func ErrorCode(err error) int16 { return code(err) }

// ErrorMessage is err's text, for Extensions' answers that carry one.
func ErrorMessage(err error) *string { return message(err) }

// listenerNotFound is Kafka's LISTENER_NOT_FOUND (72): a partition's
// leader has no endpoint on the listener the Metadata request arrived on.
// Only the Kafka listener answers it, so kerr's table does not hold it.
const listenerNotFound int16 = 72

// Package httpstatus is the one mapping from tidemark's Kafka-style error
// codes to HTTP statuses, shared by the REST API and the console.
package httpstatus

import (
	"net/http"

	"tidemark.io/services/platform/kerr"
)

// For picks the HTTP status that fits a Kafka-style code: 404 unknown
// topic or partition, 409 conflicts with the cluster's state, 413 too
// large, 503 (retry later) for what a leader or controller change fixes,
// 504 timed out, 400 for the rest of bad input.
func For(c kerr.Code) int {
	switch c {
	case kerr.UnknownTopicOrPartition:
		return http.StatusNotFound
	case kerr.TopicAlreadyExists, kerr.FencedLeaderEpoch, kerr.ElectionNotNeeded:
		return http.StatusConflict
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return http.StatusRequestEntityTooLarge
	case kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.LeaderNotAvailable,
		kerr.NotLeaderOrFollower, kerr.NotController, kerr.NetworkException, kerr.BrokerNotAvailable,
		kerr.ReplicaNotAvailable, kerr.UnknownLeaderEpoch, kerr.EligibleLeadersNotAvailable,
		kerr.PreferredLeaderNotAvailable, kerr.KafkaStorageError:
		return http.StatusServiceUnavailable
	case kerr.RequestTimedOut:
		return http.StatusGatewayTimeout
	case kerr.PolicyViolation:
		return http.StatusForbidden
	case kerr.UnsupportedVersion:
		return http.StatusNotImplemented
	case kerr.UnknownServerError:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

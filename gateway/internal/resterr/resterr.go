// Package resterr is the one JSON error body of tidemark's HTTP surfaces:
// the REST handlers, grpc-gateway's error handlers and the console's views
// all answer failures with a Body, at the HTTP status the kerr table gives
// the code (the dev launcher's refusals: see Launcher).
package resterr

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"tidemark.io/services/platform/kerr"
)

// Body is the JSON every REST and console error answers with. Code and name
// are Kafka's; retriable is the kerr table's; field names the request field
// that was wrong ("" when none); leader and controller say where to go
// instead on NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH and
// NOT_CONTROLLER when the answering node knew; lowWatermark is what a
// DeleteRecords got done before it failed.
type Body struct {
	Code       int         `json:"code"`
	Name       string      `json:"name"`
	Message    string      `json:"message"`
	Field      string      `json:"field"`
	Retriable  bool        `json:"retriable"`
	Leader     *LeaderHint `json:"leader,omitempty"`
	Controller *NodeHint   `json:"controller,omitempty"`
	// Coordinator is set on NOT_COORDINATOR when the answering broker
	// knew the group's coordinator; MemberID on MEMBER_ID_REQUIRED: the
	// member id to join again with (KIP-394).
	Coordinator *NodeHint `json:"coordinator,omitempty"`
	MemberID    string    `json:"memberId,omitempty"`
	// LowWatermark is set when a DeleteRecords failed (REQUEST_TIMED_OUT
	// waiting for the followers) after the leader's low watermark moved:
	// the low watermark reached, as Kafka's answer carries it beside the
	// error code.
	LowWatermark *int64 `json:"lowWatermark,omitempty"`
}

// LeaderHint is the partition leader the answering node knows.
type LeaderHint struct {
	ID          int32  `json:"id"`
	Address     string `json:"address,omitempty"`
	LeaderEpoch int32  `json:"leaderEpoch"`
}

// NodeHint is a node (the active controller) the answering node knows.
type NodeHint struct {
	ID      int32  `json:"id"`
	Address string `json:"address,omitempty"`
}

// Of renders e. A message-less error is described by its name.
func Of(e *kerr.Error) Body {
	msg := e.Message
	if msg == "" {
		msg = e.Code.String()
	}
	b := Body{Code: int(e.Code), Name: e.Code.String(), Message: msg, Field: e.Field, Retriable: e.Code.Retriable()}
	if l := e.Leader; l != nil {
		b.Leader = &LeaderHint{ID: l.ID, Address: l.Address, LeaderEpoch: l.LeaderEpoch}
	}
	if c := e.Controller; c != nil {
		b.Controller = &NodeHint{ID: c.ID, Address: c.Address}
	}
	if c := e.Coordinator; c != nil {
		b.Coordinator = &NodeHint{ID: c.ID, Address: c.Address}
	}
	b.MemberID = e.MemberID
	if p, ok := e.Partial.(lowWatermarked); ok {
		low := p.GetLowWatermark()
		b.LowWatermark = &low
	}
	return b
}

// lowWatermarked is a partial DeleteRecords answer (brokerv1's
// DeleteRecordsResponse), named by its method so that every surface renders
// it without knowing the broker API.
type lowWatermarked interface{ GetLowWatermark() int64 }

// Status is the HTTP status e answers with (the kerr table's column).
func Status(e *kerr.Error) int { return e.Code.HTTPStatus() }

// Required and Hints are the keys every error body has and the optional
// ones (the OpenAPI document's restError describes exactly these).
var (
	Required = []string{"code", "name", "message", "field", "retriable"}
	Hints    = []string{"leader", "controller", "coordinator", "memberId", "lowWatermark"}
)

// CheckShape reports how raw differs from a Body: a missing required key,
// a key a Body does not have, an empty name or message, or a retriable
// flag the kerr table disagrees with. Tests of every surface that answers
// errors use it.
func CheckShape(raw []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("error body %q is not a JSON object: %w", raw, err)
	}
	for _, k := range Required {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("error body %s has no %q", raw, k)
		}
	}
	for k := range m {
		if !slices.Contains(Required, k) && !slices.Contains(Hints, k) {
			return fmt.Errorf("error body %s has an unexpected key %q", raw, k)
		}
	}
	var b Body
	if err := json.Unmarshal(raw, &b); err != nil {
		return fmt.Errorf("error body %s: %w", raw, err)
	}
	// The name is usually the code's; dev-launcher errors (plain gRPC, no
	// Kafka code) are named after their gRPC code instead (Launcher).
	if b.Name == "" || b.Message == "" {
		return fmt.Errorf("error body %s: empty name or message", raw)
	}
	if b.Retriable != kerr.Code(b.Code).Retriable() {
		return fmt.Errorf("error body %s: retriable %v, the table says %v", raw, b.Retriable, !b.Retriable)
	}
	return nil
}

// Write answers e as a Body at status (503s and 429s with Retry-After).
func Write(w http.ResponseWriter, status int, e *kerr.Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	SetRetryAfter(h, status)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Of(e)) // fails only when the caller is gone
}

// SetRetryAfter tells the caller of an answer a retry may fix when to come
// back: a 503 (a leader moving, a coordinator loading) or a 429 (a stream
// limit full). One second: none of them says how long it will last.
func SetRetryAfter(h http.Header, status int) {
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
}

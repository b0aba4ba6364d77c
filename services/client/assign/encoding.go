package assign

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ProtocolType is the protocol type consumers announce in JoinGroup.
const ProtocolType = "consumer"

// Versions written: Kafka's current ConsumerProtocol versions. Readers
// accept every version and ignore fields after the ones they know, as
// Kafka's do.
const (
	SubscriptionVersion int16 = 3
	AssignmentVersion   int16 = 3
)

// Subscription is a member's JoinGroup metadata: Kafka's
// ConsumerProtocolSubscription.
type Subscription struct {
	Topics   []string
	UserData []byte
	// Owned is what the member owns as it joins (v1+): cooperative
	// assignors keep it where balance allows.
	Owned []TopicPartitions
	// Generation is the generation Owned comes from (v2+), -1 for none.
	Generation int32
	// Rack is client.rack (v3+), "" for none.
	Rack string
}

// Assignment is what the leader gives a member through SyncGroup: Kafka's
// ConsumerProtocolAssignment.
type Assignment struct {
	Partitions []TopicPartitions
	UserData   []byte
}

// ErrMalformed is returned (wrapped) for bytes that are not a
// subscription or assignment.
var ErrMalformed = errors.New("malformed consumer protocol data")

// Encode returns the subscription in Kafka's wire form, version 3.
func (s Subscription) Encode() []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(SubscriptionVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Topics)))
	for _, t := range s.Topics {
		b = appendString(b, t)
	}
	b = appendBytes(b, s.UserData)
	b = appendTopicPartitions(b, s.Owned)
	b = binary.BigEndian.AppendUint32(b, uint32(s.Generation))
	if s.Rack == "" {
		b = binary.BigEndian.AppendUint16(b, 0xffff) // null
	} else {
		b = appendString(b, s.Rack)
	}
	return b
}

// DecodeSubscription reads a subscription of any version.
func DecodeSubscription(b []byte) (Subscription, error) {
	r := reader{b: b}
	s := Subscription{Generation: -1}
	v := r.int16()
	n := r.count()
	for range n {
		s.Topics = append(s.Topics, r.string())
	}
	s.UserData = r.bytes()
	if v >= 1 {
		s.Owned = r.topicPartitions()
	}
	if v >= 2 {
		s.Generation = r.int32()
	}
	if v >= 3 {
		s.Rack = r.string()
	}
	if r.err != nil || v < 0 {
		return Subscription{}, fmt.Errorf("subscription version %d: %w", v, ErrMalformed)
	}
	return s, nil
}

// Encode returns the assignment in Kafka's wire form, version 3 (the
// layout of every version).
func (a Assignment) Encode() []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(AssignmentVersion))
	b = appendTopicPartitions(b, a.Partitions)
	return appendBytes(b, a.UserData)
}

// DecodeAssignment reads an assignment of any version. An empty input is
// an empty assignment, as Kafka reads it.
func DecodeAssignment(b []byte) (Assignment, error) {
	if len(b) == 0 {
		return Assignment{}, nil
	}
	r := reader{b: b}
	v := r.int16()
	a := Assignment{Partitions: r.topicPartitions(), UserData: r.bytes()}
	if r.err != nil || v < 0 {
		return Assignment{}, fmt.Errorf("assignment version %d: %w", v, ErrMalformed)
	}
	return a, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(b, 0xffffffff) // null
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendTopicPartitions(b []byte, tps []TopicPartitions) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(tps)))
	for _, t := range tps {
		b = appendString(b, t.Topic)
		b = binary.BigEndian.AppendUint32(b, uint32(len(t.Partitions)))
		for _, p := range t.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return b
}

// reader reads Kafka's fixed-width encoding; the first short read sets err
// and every later read returns zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = ErrMalformed
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) int16() int16 {
	if v := r.take(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *reader) int32() int32 {
	if v := r.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

// count reads an array length; null (-1) is empty, and a length the
// remaining bytes cannot hold is malformed.
func (r *reader) count() int {
	n := r.int32()
	if n < -1 || int(n) > len(r.b) {
		r.err = ErrMalformed
		return 0
	}
	return max(int(n), 0)
}

func (r *reader) string() string {
	n := r.int16()
	if n == -1 {
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) bytes() []byte {
	n := r.int32()
	if n == -1 {
		return nil
	}
	return append([]byte{}, r.take(int(n))...)
}

func (r *reader) topicPartitions() []TopicPartitions {
	var out []TopicPartitions
	for range r.count() {
		t := TopicPartitions{Topic: r.string()}
		for range r.count() {
			t.Partitions = append(t.Partitions, r.int32())
		}
		out = append(out, t)
	}
	return out
}

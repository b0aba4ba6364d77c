package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"tidemark.io/services/recordbatch"
)

// The records of __consumer_offsets use Kafka's own schemas (big-endian;
// strings are int16 length + bytes, a nullable string's length -1 is null;
// byte arrays int32 length + bytes; arrays int32 count + elements), so the
// log reads the same as a Kafka cluster's:
//
//	offset commit key   v1: int16 version=1, string group, string topic, int32 partition
//	offset commit value v3: int16 version=3, int64 offset, int32 leader_epoch,
//	                        string metadata, int64 commit_timestamp
//	offset commit value v1: int16 version=1, int64 offset, string metadata,
//	                        int64 commit_timestamp, int64 expire_timestamp
//	                        (a commit with a retention of its own, as Kafka
//	                        writes it: v1 is the value with an expiry, and
//	                        has no leader epoch); versions 0 and 2
//	                        are read too (DecodeOffset)
//	group metadata key  v2: int16 version=2, string group
//	group metadata value v3: int16 version=3, string protocol_type, int32 generation,
//	                        nullable string protocol, nullable string leader,
//	                        int64 current_state_timestamp,
//	                        members: [string member_id, nullable string group_instance_id,
//	                                  string client_id, string client_host,
//	                                  int32 rebalance_timeout, int32 session_timeout,
//	                                  bytes subscription, bytes assignment]
//
// A record with a null value is a tombstone: the group or the offset is
// gone, and compaction removes the key after delete.retention.ms.
//
// An offset commit record also carries, in a record header topic_id, the
// id its topic had when it was committed (none when the metadata could
// not tell). Kafka's schemas have no place for it and Kafka's readers of
// the topic ignore headers, so the records stay Kafka's; a coordinator
// that loads them can tell an offset of a topic since deleted and created
// again under its name from one of the live topic.
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	// offsetExpiringValueVersion is the value of an offset with an expire
	// timestamp.
	offsetExpiringValueVersion = 1
	groupKeyVersion            = 2
	groupValueVersion          = 3
)

// Key is a decoded record key: an offset commit's (Topic set) or a group's.
type Key struct {
	Group     string
	Topic     string
	Partition int32
	// IsOffset tells an offset commit key from a group metadata key.
	IsOffset bool
}

// OffsetValue is a committed offset.
type OffsetValue struct {
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	// ExpireTimestamp, when not 0, is when the offset expires (ms since
	// the epoch): the commit asked for a retention of its own (Kafka's
	// OffsetCommit v2-v4 retention_time_ms).
	ExpireTimestamp int64
}

// GroupValue is the persisted form of a group: enough for a new
// coordinator to recognise its members and their generation.
type GroupValue struct {
	ProtocolType   string
	Generation     int32
	Protocol       string
	Leader         string
	StateTimestamp int64
	Members        []MemberValue
}

// MemberValue is one member in a GroupValue.
type MemberValue struct {
	MemberID         string
	InstanceID       string
	ClientID         string
	ClientHost       string
	RebalanceTimeout int32
	SessionTimeout   int32
	Subscription     []byte
	Assignment       []byte
}

// OffsetKey encodes the key of a group's committed offset of a partition.
func OffsetKey(group, topic string, partition int32) []byte {
	var w writer
	w.i16(offsetKeyVersion)
	w.str(group)
	w.str(topic)
	w.i32(partition)
	return w.b
}

// topicIDHeader is the record header of an offset commit naming its
// topic's id.
const topicIDHeader = "topic_id"

// appendOffset appends the record of group's committed offset of tp to b,
// with topicID in its header when known.
func appendOffset(b *recordbatch.Builder, group string, tp TP, v OffsetValue, topicID string) {
	rec := recordbatch.Record{Timestamp: v.CommitTimestamp, Key: OffsetKey(group, tp.Topic, tp.Partition), Value: EncodeOffset(v)}
	var h [1]recordbatch.Header // Append copies it, so it stays on the stack
	if topicID != "" {
		h[0] = recordbatch.Header{Key: topicIDHeader, Value: []byte(topicID)}
		rec.Headers = h[:]
	}
	b.Append(rec)
}

// offsetTopicID is the topic id an offset commit record carries, "" when
// it has none (written before tidemark kept it, or by Kafka).
func offsetTopicID(headers []recordbatch.Header) string {
	for _, h := range headers {
		if h.Key == topicIDHeader {
			return string(h.Value)
		}
	}
	return ""
}

// GroupKey encodes the key of a group's metadata.
func GroupKey(group string) []byte {
	var w writer
	w.i16(groupKeyVersion)
	w.str(group)
	return w.b
}

// EncodeOffset encodes an offset commit value.
func EncodeOffset(v OffsetValue) []byte {
	var w writer
	if v.ExpireTimestamp != 0 {
		w.i16(offsetExpiringValueVersion)
		w.i64(v.Offset)
		w.str(v.Metadata)
		w.i64(v.CommitTimestamp)
		w.i64(v.ExpireTimestamp)
		return w.b
	}
	w.i16(offsetValueVersion)
	w.i64(v.Offset)
	w.i32(v.LeaderEpoch)
	w.str(v.Metadata)
	w.i64(v.CommitTimestamp)
	return w.b
}

// EncodeGroup encodes a group metadata value.
func EncodeGroup(v GroupValue) []byte {
	var w writer
	w.i16(groupValueVersion)
	w.str(v.ProtocolType)
	w.i32(v.Generation)
	w.nstr(v.Protocol)
	w.nstr(v.Leader)
	w.i64(v.StateTimestamp)
	w.i32(int32(len(v.Members)))
	for _, m := range v.Members {
		w.str(m.MemberID)
		w.nstr(m.InstanceID)
		w.str(m.ClientID)
		w.str(m.ClientHost)
		w.i32(m.RebalanceTimeout)
		w.i32(m.SessionTimeout)
		w.bytes(m.Subscription)
		w.bytes(m.Assignment)
	}
	return w.b
}

// DecodeKey decodes a record key of __consumer_offsets. Versions 0 and 1 of
// the offset key share a layout, as in Kafka.
func DecodeKey(b []byte) (Key, error) {
	r := reader{b: b}
	v := r.i16()
	var k Key
	switch v {
	case 0, offsetKeyVersion:
		k.IsOffset = true
		k.Group, k.Topic, k.Partition = r.str(), r.str(), r.i32()
	case groupKeyVersion:
		k.Group = r.str()
	default:
		return Key{}, fmt.Errorf("unknown key version %d", v)
	}
	return k, r.done("key")
}

// DecodeOffset decodes an offset commit value of any version Kafka wrote
// before its flexible ones, as Kafka's reader accepts them all:
//
//	v0: offset, metadata, commit_timestamp
//	v1: v0 + expire_timestamp (-1: none)
//	v2: v0 again (no expire timestamp)
//	v3: offset, leader_epoch, metadata, commit_timestamp
//
// Versions without a leader epoch read it as -1, unknown. Any other
// version is an error naming it: the loader skips the record.
func DecodeOffset(b []byte) (OffsetValue, error) {
	r := reader{b: b}
	var out OffsetValue
	v := r.i16()
	if r.err != nil {
		return OffsetValue{}, fmt.Errorf("offset value: %w", r.err)
	}
	switch v {
	case 0, 2:
		out = OffsetValue{Offset: r.i64(), LeaderEpoch: -1, Metadata: r.str(), CommitTimestamp: r.i64()}
	case offsetExpiringValueVersion:
		out = OffsetValue{Offset: r.i64(), LeaderEpoch: -1, Metadata: r.str(), CommitTimestamp: r.i64(), ExpireTimestamp: r.i64()}
		if out.ExpireTimestamp == -1 {
			out.ExpireTimestamp = 0 // none, as Kafka reads it
		}
	case offsetValueVersion:
		out = OffsetValue{Offset: r.i64(), LeaderEpoch: r.i32(), Metadata: r.str(), CommitTimestamp: r.i64()}
	default:
		return OffsetValue{}, fmt.Errorf("unknown offset commit value version %d (versions 0 to %d are read)", v, offsetValueVersion)
	}
	return out, r.done(fmt.Sprintf("offset value v%d", v))
}

// DecodeGroup decodes a group metadata value.
func DecodeGroup(b []byte) (GroupValue, error) {
	r := reader{b: b}
	if v := r.i16(); v != groupValueVersion {
		return GroupValue{}, fmt.Errorf("group value version %d, want %d", v, groupValueVersion)
	}
	out := GroupValue{ProtocolType: r.str(), Generation: r.i32(), Protocol: r.str(), Leader: r.str(), StateTimestamp: r.i64()}
	n := r.i32()
	if n < 0 || int(n) > len(b) {
		return GroupValue{}, fmt.Errorf("group value: %d members", n)
	}
	for i := int32(0); i < n && r.err == nil; i++ {
		out.Members = append(out.Members, MemberValue{
			MemberID: r.str(), InstanceID: r.str(), ClientID: r.str(), ClientHost: r.str(),
			RebalanceTimeout: r.i32(), SessionTimeout: r.i32(), Subscription: r.bytes(), Assignment: r.bytes(),
		})
	}
	return out, r.done("group value")
}

type writer struct{ b []byte }

func (w *writer) i16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *writer) i32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) i64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }

// maxStoredString is the longest string the records hold: their strings
// carry an int16 length, so a longer one would wrap it and leave a record
// no coordinator reads back. Requests are refused before (lockShard,
// checkJoinStrings), as Kafka's schemas refuse such a string.
const maxStoredString = math.MaxInt16

func (w *writer) str(s string) {
	w.i16(int16(len(s)))
	w.b = append(w.b, s...)
}

// nstr writes "" as a null string.
func (w *writer) nstr(s string) {
	if s == "" {
		w.i16(-1)
		return
	}
	w.str(s)
}

func (w *writer) bytes(p []byte) {
	w.i32(int32(len(p)))
	w.b = append(w.b, p...)
}

var errShort = errors.New("truncated")

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		if r.err == nil {
			r.err = errShort
		}
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) i16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *reader) i32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *reader) i64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

// str reads a string; a null one reads as "".
func (r *reader) str() string {
	n := r.i16()
	if n == -1 {
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) bytes() []byte {
	n := r.i32()
	if n == -1 {
		return nil
	}
	return append([]byte(nil), r.take(int(n))...)
}

func (r *reader) done(what string) error {
	if r.err != nil {
		return fmt.Errorf("%s: %w", what, r.err)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%s: %d trailing bytes", what, len(r.b))
	}
	return nil
}

package group

import (
	"context"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// A commit with a retention of its own (Kafka's OffsetCommit v2-v4
// retention_time_ms) expires that long after the commit, as Kafka's
// expireTimestamp does, instead of offsets.retention.minutes: sooner or
// later than it, stored as Kafka stores it (offset value v1 with the
// expire timestamp), so a coordinator move keeps it. A retention of -1 is
// the broker's. Before, the retention asked for was ignored.
func TestACommitsOwnRetentionIsItsExpiry(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.retentionMinutes = 10
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	s := &Service{C: c}
	ctx := context.Background()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "short"); return code == kerr.None })
	commit := func(group string, retention *int64) {
		t.Helper()
		if _, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: -1, RetentionTimeMs: retention,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 9, CommittedLeaderEpoch: 4}}}}}); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	minus1 := int64(-1)
	commit("short", ms(2*time.Minute))
	commit("long", ms(30*time.Minute))
	commit("default", &minus1)
	has := func(s *Service, group string) bool {
		r, code := fetchErr(s, group)
		return code == kerr.None && len(r.GetTopics()) == 1
	}

	clock.advance(time.Minute)
	c.expire()
	if !has(s, "short") || !has(s, "long") || !has(s, "default") {
		t.Fatal("an offset expired a minute after its commit")
	}
	clock.advance(time.Minute)
	c.expire()
	if has(s, "short") {
		t.Error("the offset committed with a retention of 2 minutes outlived it")
	}

	// The coordinator moves: the next one reads the expiry from the log.
	c.Close()
	c2 := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	defer c2.Close()
	s2 := &Service{C: c2}
	waitUntil(t, "the second load", func() bool { _, code := fetchErr(s2, "long"); return code == kerr.None })
	r, _ := fetchErr(s2, "long")
	if p := r.GetTopics()[0].GetPartitions()[0]; p.GetCommittedOffset() != 9 || p.GetCommittedLeaderEpoch() != -1 {
		t.Errorf("reloaded offset %d at epoch %d; want 9 at -1 (the value with an expiry has no leader epoch, as Kafka's v1)",
			p.GetCommittedOffset(), p.GetCommittedLeaderEpoch())
	}
	clock.advance(9 * time.Minute) // 11 minutes after the commits
	c2.expire()
	if !has(s2, "long") {
		t.Error("the offset committed with a retention of 30 minutes went with offsets.retention.minutes (10)")
	}
	if has(s2, "default") {
		t.Error("the offset committed with retention -1 outlived offsets.retention.minutes")
	}
	clock.advance(20 * time.Minute)
	c2.expire()
	if has(s2, "long") {
		t.Error("the offset committed with a retention of 30 minutes outlived it")
	}
}

// The offset commit value with an expire timestamp is Kafka's v1, and one
// without is v3; both read back as written (v1 without a leader epoch),
// and v1's -1 expire timestamp is none, as Kafka reads it.
func TestOffsetValueWithAnExpiryIsKafkasV1(t *testing.T) {
	with := OffsetValue{Offset: 5, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 61000}
	b := EncodeOffset(with)
	if b[0] != 0 || b[1] != 1 {
		t.Fatalf("value with an expiry written as version %d, want 1", int(b[0])<<8|int(b[1]))
	}
	got, err := DecodeOffset(b)
	if want := (OffsetValue{Offset: 5, LeaderEpoch: -1, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 61000}); err != nil || got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	without := OffsetValue{Offset: 5, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 1000}
	if b := EncodeOffset(without); b[1] != 3 {
		t.Fatalf("value without an expiry written as version %d, want 3", b[1])
	} else if got, err := DecodeOffset(b); err != nil || got != without {
		t.Fatalf("read back %+v, %v; want %+v", got, err, without)
	}
	none := EncodeOffset(OffsetValue{Offset: 5, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 7})
	copy(none[len(none)-8:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if got, err := DecodeOffset(none); err != nil || got.ExpireTimestamp != 0 {
		t.Fatalf("v1 with expire timestamp -1 read as %+v, %v; want no expiry", got, err)
	}
}

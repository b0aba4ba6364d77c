package logstore

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func idem(pid int64, epoch int16, seq int32, records int) batchSpec {
	return batchSpec{records: records, valueSize: 8, ts: 1000, pid: pid, epoch: epoch, seq: seq}
}

// at sets the batch's first timestamp.
func (b batchSpec) at(ts int64) batchSpec {
	b.ts = ts
	return b
}

// hoursAgo is a timestamp h hours before the clock: two is old enough for a
// retention.ms of an hour to delete it, young enough that the producer has
// not expired (producer.id.expiration.ms, 24 h).
func hoursAgo(clk *clock, h int) int64 {
	return clk.Now().Add(-time.Duration(h) * time.Hour).UnixMilli()
}

func TestIdempotentDuplicates(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	var firsts []AppendInfo
	seq := int32(0)
	for range 6 {
		firsts = append(firsts, appendLeader(t, l, idem(1, 0, seq, 2), 0))
		seq += 2
	}
	leo := l.LogEndOffset()
	// A retry of any of the last five returns the original offsets.
	for i := 1; i < 6; i++ {
		info, err := l.AppendAsLeader(idem(1, 0, int32(2*i), 2).build(), 0)
		if err != nil {
			t.Fatalf("retry of batch %d: %v", i, err)
		}
		if !info.Duplicate || info.FirstOffset != firsts[i].FirstOffset || info.LastOffset != firsts[i].LastOffset {
			t.Fatalf("retry of batch %d: %+v, original %+v", i, info, firsts[i])
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatal("a duplicate was appended")
	}
	// The sixth-oldest has been forgotten: it is out of order now.
	_, err := l.AppendAsLeader(idem(1, 0, 0, 2).build(), 0)
	wantCode(t, err, kerr.OutOfOrderSequenceNumber)
	// A duplicate inside a multi-batch append is refused.
	set := append(idem(1, 0, 10, 2).build(), idem(1, 0, 12, 2).build()...)
	_, err = l.AppendAsLeader(set, 0)
	wantCode(t, err, kerr.DuplicateSequenceNumber)
	if l.LogEndOffset() != leo {
		t.Fatal("a refused append moved the LEO")
	}
}

func TestIdempotentSequenceAndEpochRules(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	appendLeader(t, l, idem(5, 3, 0, 3), 0) // seqs 0..2
	steps := []struct {
		name string
		spec batchSpec
		code kerr.Code
	}{
		{"gap", idem(5, 3, 4, 1), kerr.OutOfOrderSequenceNumber},
		{"overlap that is not a retry", idem(5, 3, 1, 3), kerr.OutOfOrderSequenceNumber},
		{"older epoch", idem(5, 2, 3, 1), kerr.InvalidProducerEpoch},
		{"new epoch not at 0", idem(5, 4, 3, 1), kerr.OutOfOrderSequenceNumber},
		{"next in sequence", idem(5, 3, 3, 2), kerr.None},
		{"new epoch at 0", idem(5, 4, 0, 1), kerr.None},
		{"old epoch after the bump", idem(5, 3, 5, 1), kerr.InvalidProducerEpoch},
		{"unknown producer, not at sequence 0", idem(6, 0, 77, 1), kerr.UnknownProducerID},
		{"unknown producer at sequence 0", idem(6, 0, 0, 1), kerr.None},
		{"then in sequence", idem(6, 0, 1, 1), kerr.None},
		{"non-idempotent batch", plain(1, 1, 1), kerr.None},
	}
	for _, s := range steps {
		leo := l.LogEndOffset()
		_, err := l.AppendAsLeader(s.spec.build(), 0)
		if got := kerr.CodeOf(err); got != s.code {
			t.Fatalf("%s: %v (%v), want %v", s.name, err, got, s.code)
		}
		if err != nil && l.LogEndOffset() != leo {
			t.Fatalf("%s: refused append moved the LEO", s.name)
		}
	}
}

func TestIdempotentSequenceWraps(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	// The producer's earlier batches came in as a follower's (a leader
	// accepts only sequence 0 from a producer it does not know).
	first := recordbatch.Batch(idem(9, 0, math.MaxInt32-2, 2).build()) // MaxInt32-2, MaxInt32-1
	first.SetPartitionLeaderEpoch(0)
	if _, err := l.AppendAsFollower(first); err != nil {
		t.Fatal(err)
	}
	appendLeader(t, l, idem(9, 0, math.MaxInt32, 3), 0) // MaxInt32, 0, 1
	appendLeader(t, l, idem(9, 0, 2, 1), 0)
	info, err := l.AppendAsLeader(idem(9, 0, math.MaxInt32, 3).build(), 0)
	if err != nil || !info.Duplicate || info.FirstOffset != 2 {
		t.Fatalf("retry across the wrap: %+v, %v", info, err)
	}
	_, err = l.AppendAsLeader(idem(9, 0, 4, 1).build(), 0)
	wantCode(t, err, kerr.OutOfOrderSequenceNumber)
}

func TestFollowerUpdatesProducerStateWithoutChecks(t *testing.T) {
	leader := openLogOpts(t, Options{FS: newMem(t), Dir: "/data/l-0", Config: smallConfig()})
	follower := openLogOpts(t, Options{FS: newMem(t), Dir: "/data/f-0", Config: smallConfig()})
	for i := range 4 {
		appendLeader(t, leader, idem(3, 0, int32(i*2), 2), 1)
	}
	res, _ := leader.Read(0, 1<<20, leader.LogEndOffset())
	if _, err := follower.AppendAsFollower(res.Records); err != nil {
		t.Fatal(err)
	}
	// After a failover the follower, now leader, recognises the retry.
	info, err := follower.AppendAsLeader(idem(3, 0, 6, 2).build(), 2)
	if err != nil || !info.Duplicate || info.FirstOffset != 6 {
		t.Fatalf("retry on the new leader: %+v, %v", info, err)
	}
}

func TestProducerStateSurvivesReopen(t *testing.T) {
	for _, clean := range []bool{true, false} {
		fsys := newMem(t)
		cfg := smallConfig()
		l, err := Open(Options{FS: fsys, Dir: testDir, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		// Recent timestamps: a producer idle longer than
		// producer.id.expiration.ms is dropped at loading.
		ts := time.Now().UnixMilli()
		var infos []AppendInfo
		for i := range 30 { // enough to roll several segments and snapshot
			infos = append(infos, appendLeader(t, l, batchSpec{records: 2, valueSize: 60, ts: ts, pid: int64(i % 3), epoch: 0, seq: int32(i / 3 * 2)}, 0))
		}
		rp := int64(0)
		if clean {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			rp = l.LogEndOffset()
		} else {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			rp = l.RecoveryPoint() / 2 // an older recovery point: snapshot + replay
		}
		r := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, CleanShutdown: clean, RecoveryPoint: rp})
		for i := 25; i < 30; i++ {
			info, err := r.AppendAsLeader(batchSpec{records: 2, valueSize: 60, ts: ts, pid: int64(i % 3), epoch: 0, seq: int32(i / 3 * 2)}.build(), 0)
			if err != nil || !info.Duplicate || info.FirstOffset != infos[i].FirstOffset {
				t.Fatalf("clean=%v: retry of batch %d after reopen: %+v, %v", clean, i, info, err)
			}
		}
		if _, err := r.AppendAsLeader(idem(0, 0, 40, 1).build(), 0); kerr.CodeOf(err) != kerr.OutOfOrderSequenceNumber {
			t.Fatalf("clean=%v: gap after reopen: %v", clean, err)
		}
		l.Close()
	}
}

func TestSnapshotsKeptAndCorruptOnesIgnored(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, smallConfig(), newClock())
	for i := range 40 {
		appendLeader(t, l, idem(1, 0, int32(i), 1), 0)
		appendLeader(t, l, plain(1, 150, 1), 0)
	}
	l.bg.Wait() // the rolls delete old snapshots in the background
	snaps, _ := listSnapshots(fsys, testDir)
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots kept, want 2", len(snaps))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ = listSnapshots(fsys, testDir)
	last := snaps[len(snaps)-1]
	if last != l.LogEndOffset() {
		t.Fatalf("no snapshot at the LEO after Close: %v", snaps)
	}
	// Damage the newest snapshot: loading falls back and still knows producer 1.
	f, _ := fsys.Open(testDir + "/" + offsetName(last, snapshotSuffix))
	f.WriteAt([]byte{0xff, 0xff, 0xff}, 7)
	f.Close()
	r := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	info, err := r.AppendAsLeader(idem(1, 0, 39, 1).build(), 0)
	if err != nil || !info.Duplicate {
		t.Fatalf("retry after corrupt snapshot: %+v %v", info, err)
	}
	if _, err := fsys.Stat(testDir + "/" + offsetName(last, snapshotSuffix)); err == nil {
		t.Fatal("corrupt snapshot not deleted")
	}
}

func TestProducerExpiry(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.ProducerIDExpiration = time.Hour
	l := openLog(t, newMem(t), cfg, clk)
	appendLeader(t, l, batchSpec{records: 1, valueSize: 1, ts: clk.Now().UnixMilli(), pid: 1, epoch: 0, seq: 0}, 0)
	clk.Advance(40 * time.Minute)
	appendLeader(t, l, batchSpec{records: 1, valueSize: 1, ts: clk.Now().UnixMilli(), pid: 2, epoch: 0, seq: 0}, 0)
	clk.Advance(30 * time.Minute)
	if n := l.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d", n)
	}
	// Producer 1 is unknown now: it must start again at sequence 0 (its
	// client bumps its epoch on UNKNOWN_PRODUCER_ID); producer 2 is still
	// checked against its last batch.
	_, err := l.AppendAsLeader(idem(1, 0, 50, 1).build(), 0)
	wantCode(t, err, kerr.UnknownProducerID)
	if _, err := l.AppendAsLeader(idem(1, 1, 0, 1).build(), 0); err != nil {
		t.Fatal(err)
	}
	_, err = l.AppendAsLeader(idem(2, 0, 50, 1).build(), 0)
	wantCode(t, err, kerr.OutOfOrderSequenceNumber)
}

// A batch whose records carry an old CreateTime (replayed from yesterday)
// keeps its producer for producer.id.expiration.ms from its append, on the
// leader and on a follower: counted from the timestamp, the next expiry
// pass forgot the producer, and the resend of that batch after a lost
// answer was UNKNOWN_PRODUCER_ID, which the producer answers by writing it
// again under a new epoch.
func TestProducerExpiryCountsFromTheAppend(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.ProducerIDExpiration = time.Hour
	leader, follower := openLog(t, newMem(t), cfg, clk), openLog(t, newMem(t), cfg, clk)
	day := clk.Now().Add(-25 * time.Hour).UnixMilli()
	appendLeader(t, leader, batchSpec{records: 1, valueSize: 1, ts: day, pid: 1, epoch: 0, seq: 0}, 0)
	appendLeader(t, leader, batchSpec{records: 1, valueSize: 1, ts: day, pid: 1, epoch: 0, seq: 1}, 0)
	res, err := leader.Read(0, 1<<20, leader.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(bytes.Clone(res.Records)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(59 * time.Minute)
	for name, l := range map[string]*Log{"leader": leader, "follower": follower} {
		if n := l.ExpireProducers(); n != 0 {
			t.Fatalf("%s: expired %d producers within producer.id.expiration.ms of their append", name, n)
		}
		info, err := l.AppendAsLeader(idem(1, 0, 1, 1).build(), 0)
		if err != nil || !info.Duplicate || info.FirstOffset != 1 {
			t.Fatalf("%s: resend of the last batch: %+v %v, want a duplicate at offset 1", name, info, err)
		}
	}
	clk.Advance(2 * time.Minute)
	if n := leader.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d producers an hour after their append, want 1", n)
	}
}

// After a crash the batches since the newest snapshot are replayed, and
// their append time is not in the log: the producer of a batch with an old
// CreateTime is kept for producer.id.expiration.ms from the load.
func TestReplayedProducerExpiryCountsFromTheLoad(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.ProducerIDExpiration = time.Hour
	fsys := newMem(t)
	l := openLog(t, fsys, cfg, clk)
	day := clk.Now().Add(-25 * time.Hour).UnixMilli()
	appendLeader(t, l, batchSpec{records: 1, valueSize: 1, ts: day, pid: 1, epoch: 0, seq: 0}, 0)
	appendLeader(t, l, batchSpec{records: 1, valueSize: 1, ts: day, pid: 1, epoch: 0, seq: 1}, 0)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Abandon()
	again := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now})
	if snaps, _ := listSnapshots(fsys, testDir); len(snaps) != 0 {
		t.Fatalf("setup: snapshots %v, want none (the table comes from the replay)", snaps)
	}
	clk.Advance(59 * time.Minute)
	if n := again.ExpireProducers(); n != 0 {
		t.Fatalf("expired %d replayed producers within producer.id.expiration.ms of the load", n)
	}
	info, err := again.AppendAsLeader(idem(1, 0, 1, 1).build(), 0)
	if err != nil || !info.Duplicate || info.FirstOffset != 1 {
		t.Fatalf("resend of the last batch after the crash: %+v %v, want a duplicate at offset 1", info, err)
	}
}

// A producer that had already expired when the log is opened is not
// loaded from the snapshot (Kafka's loadFromSnapshot skips it): it is
// unknown at once, not only after the next expiry pass.
func TestLoadingDropsExpiredProducers(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.ProducerIDExpiration = time.Hour
	fsys := newMem(t)
	l := openLog(t, fsys, cfg, clk)
	appendLeader(t, l, batchSpec{records: 1, valueSize: 1, ts: clk.Now().UnixMilli(), pid: 1, epoch: 0, seq: 0}, 0)
	clk.Advance(50 * time.Minute)
	appendLeader(t, l, batchSpec{records: 1, valueSize: 1, ts: clk.Now().UnixMilli(), pid: 2, epoch: 0, seq: 0}, 0)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Producer 1 expires while the broker is down; producer 2 does not.
	clk.Advance(20 * time.Minute)
	again := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now, CleanShutdown: true, RecoveryPoint: leo})
	if snaps, _ := listSnapshots(fsys, testDir); len(snaps) == 0 || snaps[len(snaps)-1] != leo {
		t.Fatalf("setup: snapshots %v, want one at %d", snaps, leo)
	}
	_, err := again.AppendAsLeader(idem(1, 0, 1, 1).build(), 0)
	wantCode(t, err, kerr.UnknownProducerID)
	_, err = again.AppendAsLeader(idem(2, 0, 50, 1).build(), 0)
	wantCode(t, err, kerr.OutOfOrderSequenceNumber)
}

// A producer whose batches retention deleted is remembered (Kafka since
// KIP-360): a retry of its last batch, e.g. after a leader change lost the
// acknowledgement, is a duplicate, not a second copy; also after a restart.
func TestRetentionKeepsProducersWhoseBatchesItDeleted(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	fsys := newMem(t)
	l := openLog(t, fsys, cfg, clk)
	// Timestamps in 1970, past retention; then more old records, so the
	// first segments hold only old ones.
	first := appendLeader(t, l, idem(7, 0, 0, 2).at(hoursAgo(clk, 2)), 0)
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, 2000+int64(i)), 0)
	}
	now := clk.Now().UnixMilli()
	for i := range 40 {
		appendLeader(t, l, plain(3, 40, now+int64(i)), 0)
	}
	if _, err := l.DeleteOldSegments(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() <= first.LastOffset {
		t.Fatalf("setup: log start %d, the producer's batch ends at %d", l.LogStartOffset(), first.LastOffset)
	}
	retry := func(l *Log, when string) {
		t.Helper()
		leo := l.LogEndOffset()
		info, err := l.AppendAsLeader(idem(7, 0, 0, 2).build(), 0)
		if err != nil {
			t.Fatalf("%s: retry: %v", when, err)
		}
		if !info.Duplicate || l.LogEndOffset() != leo {
			t.Fatalf("%s: retry of a batch retention deleted was written again at %d (LEO %d -> %d)", when, info.FirstOffset, leo, l.LogEndOffset())
		}
	}
	retry(l, "after retention")
	// A roll writes a snapshot that must still hold the producer.
	for i := range 40 {
		appendLeader(t, l, plain(3, 40, now+100+int64(i)), 0)
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean restart, as the manager opens it after its clean-shutdown
	// marker: the producer comes back from the Close snapshot.
	retry(openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now, CleanShutdown: true, RecoveryPoint: leo}), "after a restart")
}

// Retention that empties a quiet log rolls a new, empty segment at the LEO
// and retires every producer snapshot below it; the recovery point must
// follow (as a roll on append makes it, through a flush), or a crash later
// recovers from the old recovery point, where no snapshot is left, and the
// producers retention kept are forgotten: a retried batch is written twice.
func TestRetentionEmptyingALogKeepsItsProducersThroughACrash(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	fsys := newMem(t)
	l := openLog(t, fsys, cfg, clk)
	appendLeader(t, l, idem(7, 0, 0, 2).at(hoursAgo(clk, 2)), 0)
	for i := range 30 {
		appendLeader(t, l, plain(3, 40, 2000+int64(i)), 0) // 1970: past retention
	}
	if len(l.segments()) < 2 {
		t.Fatalf("setup: %d segments", len(l.segments()))
	}
	l.bg.Wait() // the flushes of the rolls on append
	leo := l.LogEndOffset()
	if rp := l.RecoveryPoint(); rp >= leo {
		t.Fatalf("setup: recovery point %d already at the LEO %d", rp, leo)
	}
	if n, err := l.DeleteOldSegments(leo); err != nil || n == 0 || l.LogStartOffset() != leo {
		t.Fatalf("retention: %d segments, %v; log start %d, LEO %d", n, err, l.LogStartOffset(), leo)
	}
	l.bg.Wait()
	// The broker's recovery checkpoint holds the recovery point; then the
	// process dies.
	rp := l.RecoveryPoint()
	l.Abandon()
	again := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: rp, LogStartOffset: leo})
	info, err := again.AppendAsLeader(idem(7, 0, 0, 2).build(), 0)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !info.Duplicate || again.LogEndOffset() != leo {
		t.Fatalf("after the crash (recovery point %d, LEO %d) the retry was written again at %d", rp, leo, info.FirstOffset)
	}
}

// The same through the broker's Manager, whose recovery point checkpoint
// is what a restart reads: retention empties a quiet log between two
// periodic checkpoints, and the process dies before the next. Retention
// checkpoints the recovery point itself once the new segment is flushed;
// before, loading skipped the only snapshot left (above the checkpointed
// recovery point) and the retry was written twice.
func TestRetentionEmptyingALogCheckpointsItsRecoveryPoint(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	fsys := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	open := func() *Manager {
		m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get, NoBackground: true,
			Now: clk.Now, ConfigFor: func(string) Config { return cfg }})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	l, err := m.GetOrCreate(tpA, cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendLeader(t, l, idem(7, 0, 0, 2).at(hoursAgo(clk, 2)), 0)
	for i := range 30 {
		appendLeader(t, l, plain(3, 40, 2000+int64(i)), 0) // 1970: past retention
	}
	l.bg.Wait()
	if err := m.CheckpointRecoveryPoints(); err != nil { // the periodic checkpoint
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	hw.set(tpA, leo)
	m.RunRetention()
	l.bg.Wait()
	if l.LogStartOffset() != leo {
		t.Fatalf("setup: log start %d, LEO %d", l.LogStartOffset(), leo)
	}
	m.Abandon()
	m2 := open()
	defer m2.Close()
	l2, _ := m2.Log(tpA)
	info, err := l2.AppendAsLeader(idem(7, 0, 0, 2).build(), 0)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !info.Duplicate {
		t.Fatalf("the producer was forgotten across the crash: its retry was written again at %d (LEO %d -> %d)", info.FirstOffset, leo, l2.LogEndOffset())
	}
}

// A process that dies (kill -9) shortly after rolls leaves its newest
// producer snapshots above the recovery point last checkpointed (the
// periodic checkpoint is up to a minute behind the flushes), and older ones
// are pruned. Loading takes the newest snapshot at or below the recovered
// log end, as Kafka's does: the producers retention kept are in it, and a
// retry of such a producer's last batch is still a duplicate. Trusting only
// snapshots at or below the checkpointed recovery point rebuilt the table
// from the log start and wrote the retry twice.
func TestRetentionKeptProducersSurviveACrashSoonAfterRolls(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	fsys := newMem(t)
	l := openLog(t, fsys, cfg, clk)
	first := appendLeader(t, l, idem(7, 0, 0, 2).at(hoursAgo(clk, 2)), 0)
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, 2000+int64(i)), 0) // 1970: past retention
	}
	now := clk.Now().UnixMilli()
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, now+int64(i)), 0)
	}
	if _, err := l.DeleteOldSegments(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() <= first.LastOffset {
		t.Fatalf("setup: log start %d, the producer's batch ends at %d", l.LogStartOffset(), first.LastOffset)
	}
	l.bg.Wait()
	rp := l.RecoveryPoint() // the last periodic checkpoint
	// Two more rolls: both snapshots left are above rp.
	for n := len(l.segments()); len(l.segments()) < n+2; {
		appendLeader(t, l, plain(3, 40, now+100), 0)
	}
	l.bg.Wait()
	if snaps, _ := listSnapshots(fsys, testDir); len(snaps) == 0 || snaps[0] <= rp {
		t.Fatalf("setup: snapshots %v, want all above the checkpointed recovery point %d", snaps, rp)
	}
	leo, start := l.LogEndOffset(), l.LogStartOffset()
	l.Abandon()
	again := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: rp, LogStartOffset: start})
	info, err := again.AppendAsLeader(idem(7, 0, 0, 2).build(), 0)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !info.Duplicate || again.LogEndOffset() != leo {
		t.Fatalf("after the crash (recovery point %d, LEO %d) the retry was written again at %d", rp, leo, info.FirstOffset)
	}
}

// A follower's truncation below both snapshots left (the two newest are
// kept) rebuilds the producer table from the log start. A producer whose
// batches retention deleted is in no batch the rebuild reads, and no
// truncation can remove its state: it stays, and a retry of its last batch
// on this replica, leader after the failover, is still a duplicate.
func TestTruncationBelowEverySnapshotKeepsProducersRetentionKept(t *testing.T) {
	l, now := logWithAProducerRetentionTook(t)
	for n := len(l.segments()); len(l.segments()) < n+3; {
		appendLeader(t, l, plain(3, 40, now+100), 0)
	}
	l.bg.Wait()
	snaps, _ := listSnapshots(l.fs, testDir)
	cut := snaps[0] - 1
	if cut < l.LogStartOffset() {
		t.Fatalf("setup: snapshots %v, log start %d", snaps, l.LogStartOffset())
	}
	leo, err := l.TruncateTo(cut)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.AppendAsLeader(idem(7, 0, 0, 2).build(), 1)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !info.Duplicate || l.LogEndOffset() != leo {
		t.Fatalf("after a truncation to %d (snapshots %v) the retry was written again at %d", cut, snaps, info.FirstOffset)
	}
}

// As above, with the producer's next batch in the cut tail: the
// truncation takes that batch, not the one retention took, whose retry is
// still a duplicate; the cut batch, sent again, is appended anew. The
// producer was forgotten whole, and the retry written a second time.
func TestTruncationBelowEverySnapshotKeepsWhatRetentionTookOfAProducer(t *testing.T) {
	l, now := logWithAProducerRetentionTook(t)
	next := appendLeader(t, l, idem(7, 0, 2, 2), 0)
	for n := len(l.segments()); len(l.segments()) < n+3; {
		appendLeader(t, l, plain(3, 40, now+100), 0)
	}
	l.bg.Wait()
	snaps, _ := listSnapshots(l.fs, testDir)
	if snaps[0] <= next.FirstOffset {
		t.Fatalf("setup: snapshots %v, the producer's second batch at %d", snaps, next.FirstOffset)
	}
	leo, err := l.TruncateTo(next.FirstOffset)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.AppendAsLeader(idem(7, 0, 0, 2).build(), 1)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !info.Duplicate || l.LogEndOffset() != leo {
		t.Fatalf("after a truncation to %d (snapshots %v) the retry of a batch retention took was written again at %d", next.FirstOffset, snaps, info.FirstOffset)
	}
	again, err := l.AppendAsLeader(idem(7, 0, 2, 2).build(), 1)
	if err != nil {
		t.Fatalf("the cut batch sent again: %v", err)
	}
	if again.Duplicate || again.FirstOffset != leo {
		t.Fatalf("the cut batch sent again: %+v, want appended at %d", again, leo)
	}
}

// Two rolls before the first one's background flush runs: that flush moves
// the recovery point to the first roll's offset, past its snapshot, so that
// snapshot must be durable by then, not only the newer one. A power loss
// while the second flush waits for the disk may lose the newer segment's
// data; loading then takes the older snapshot, and the producers retention
// kept are only in it. Syncing just the newest snapshot left it torn or
// empty on some crashes, and a retry was written twice.
func TestEverySnapshotTheRecoveryPointPassesIsDurable(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	mem := newMem(t)
	ffs := vfs.NewFaultFS(mem)
	l := openLogOpts(t, Options{FS: ffs, Dir: testDir, Config: cfg, Now: clk.Now})
	first := appendLeader(t, l, idem(7, 0, 0, 2).at(hoursAgo(clk, 2)), 0)
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, 2000+int64(i)), 0) // 1970: past retention
	}
	now := clk.Now().UnixMilli()
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, now+int64(i)), 0)
	}
	if _, err := l.DeleteOldSegments(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() <= first.LastOffset {
		t.Fatalf("setup: log start %d, the producer's batch ends at %d", l.LogStartOffset(), first.LastOffset)
	}
	l.bg.Wait()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every fsync waits (a busy disk) while two rolls happen: both flushes
	// they start wait too.
	stall := make(chan struct{})
	removeStall := ffs.Inject(vfs.Fault{Ops: vfs.OpSync | vfs.OpSyncDir, Stall: stall})
	deadline := time.Now().Add(10 * time.Second)
	n := len(l.segments())
	for len(l.segments()) < n+1 {
		appendLeader(t, l, plain(3, 40, now+100), 0)
	}
	// The first roll's flush holds flushMu, waiting for the disk, before
	// the second roll.
	for ffs.Fired() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("setup: the first roll's flush did not start")
		}
		time.Sleep(time.Millisecond)
	}
	for len(l.segments()) < n+2 {
		appendLeader(t, l, plain(3, 40, now+100), 0)
	}
	older, newer := l.segments()[n].base, l.segments()[n+1].base
	// The snapshots below the two newest are pruned (not fsynced), so that
	// only the rolls' snapshots are left to load from.
	for {
		snaps, _ := listSnapshots(mem, testDir)
		if slices.Equal(snaps, []int64{older, newer}) && !l.pruning.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("setup: snapshots %v, want [%d %d]", snaps, older, newer)
		}
		time.Sleep(time.Millisecond)
	}
	// The disk catches up with the first flush; the second one's sync of
	// the newer segment waits, and the power fails then.
	hold := make(chan struct{})
	defer close(hold)
	ffs.Inject(vfs.Fault{Ops: vfs.OpSync, Path: offsetName(older, logSuffix), Stall: hold})
	removeStall()
	close(stall)
	for l.RecoveryPoint() != older {
		if time.Now().After(deadline) {
			t.Fatalf("setup: recovery point %d, want %d", l.RecoveryPoint(), older)
		}
		time.Sleep(time.Millisecond)
	}
	start := l.LogStartOffset()
	for seed := range uint64(40) {
		crashed := mem.CrashClone(seed)
		again := openLogOpts(t, Options{FS: crashed, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: older, LogStartOffset: start})
		leo := again.LogEndOffset()
		if leo < older {
			t.Fatalf("seed %d: the log ends at %d, below the recovery point %d", seed, leo, older)
		}
		info, err := again.AppendAsLeader(idem(7, 0, 0, 2).build(), 0)
		if err != nil {
			t.Fatalf("seed %d: retry: %v", seed, err)
		}
		if !info.Duplicate || again.LogEndOffset() != leo {
			t.Errorf("seed %d: after the crash (recovery point %d, LEO %d) the retry was written again at %d", seed, older, leo, info.FirstOffset)
		}
		again.Abandon()
	}
}

// logWithAProducerRetentionTook is a log whose producer 7's only batch
// (sequences 0-1) retention has deleted, and now, the clock's time in ms.
func logWithAProducerRetentionTook(t *testing.T) (*Log, int64) {
	t.Helper()
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	l := openLog(t, newMem(t), cfg, clk)
	first := appendLeader(t, l, idem(7, 0, 0, 2).at(hoursAgo(clk, 2)), 0)
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, 2000+int64(i)), 0) // 1970: past retention
	}
	now := clk.Now().UnixMilli()
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, now+int64(i)), 0)
	}
	if _, err := l.DeleteOldSegments(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() <= first.LastOffset {
		t.Fatalf("setup: log start %d, the producer's batch ends at %d", l.LogStartOffset(), first.LastOffset)
	}
	return l, now
}

package logstore

import (
	"bytes"
	"errors"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// A partition deleted and created again (a topic of the same name, a
// replica moved away and back) is a new log: the checkpoints of the old one
// must never apply to it. Before, the deleted partition's entries stayed in
// the data dir's checkpoint files until their next write (up to a minute for
// the log start and recovery points) and, after a crash, in every later
// write too; a broker killed in that window opened the new log with the old
// log start (hiding acknowledged records below it), the old recovery point
// (trusting unsynced data) and the old HW (past what the new log had
// committed).
func TestARecreatedPartitionIgnoresTheDeletedOnesCheckpoints(t *testing.T) {
	for _, crashBetween := range []bool{false, true} {
		name := "recreated at once"
		if crashBetween {
			name = "crash between deletion and creation"
		}
		t.Run(name, func(t *testing.T) {
			fsys := newMem(t)
			hw := &hwTable{m: map[TopicPartition]int64{}}
			m := openManager(t, fsys, hw)
			old, err := m.GetOrCreate(tpA, smallConfig())
			if err != nil {
				t.Fatal(err)
			}
			fill(t, old, 20, 3, 40) // offsets [0, 60)
			if err := old.AdvanceLogStartOffset(45, 60); err != nil {
				t.Fatal(err)
			}
			hw.set(tpA, 60)
			if err := m.CheckpointRecoveryPoints(); err != nil {
				t.Fatal(err)
			}
			if err := m.CheckpointHighWatermarks(); err != nil {
				t.Fatal(err)
			}
			if err := m.Delete(tpA); err != nil {
				t.Fatal(err)
			}
			delete(hw.m, tpA)
			if crashBetween {
				m.Abandon() // kill -9: nothing more is written
				m = openManager(t, fsys, hw)
			}
			l, err := m.GetOrCreate(tpA, smallConfig())
			if err != nil {
				t.Fatal(err)
			}
			if l.LogStartOffset() != 0 || l.LogEndOffset() != 0 {
				t.Fatalf("new log starts at %d, ends at %d", l.LogStartOffset(), l.LogEndOffset())
			}
			fill(t, l, 4, 3, 40) // offsets [0, 12), acknowledged
			hw.set(tpA, 3)       // only the first batch committed when the broker dies
			m.Abandon()

			m2 := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
			defer m2.Close()
			l2, ok := m2.Log(tpA)
			if !ok {
				t.Fatalf("log not reopened: offline %v", m2.Offline())
			}
			if l2.LogStartOffset() != 0 || l2.LogEndOffset() != 12 {
				t.Fatalf("reopened log [%d, %d), want [0, 12): the deleted log's start applied", l2.LogStartOffset(), l2.LogEndOffset())
			}
			for off := int64(0); off < 12; off += 3 {
				checkReadAt(t, l2, off)
			}
			if h, _ := m2.RecoveredHighWatermark(tpA); h > 3 {
				t.Fatalf("recovered HW %d, beyond the new log's committed 3: the deleted log's HW applied", h)
			}
			if rp := l2.RecoveryPoint(); rp != 0 {
				t.Fatalf("recovery point %d: the deleted log's applied to unsynced data", rp)
			}
		})
	}
}

// Power lost at any file operation of deleting a partition, creating it
// again and writing the new log (flushed): the reopened directory holds the
// old log whole, or no log, or the new one starting at 0, whose records and
// HW are its own, and every flushed record once the flush returned.
func TestCrashWhileRecreatingAPartitionAtEveryStep(t *testing.T) {
	errCrash := errors.New("power lost")
	mutating := vfs.OpCreate | vfs.OpWrite | vfs.OpSync | vfs.OpTruncate | vfs.OpRename | vfs.OpRemove | vfs.OpSyncDir | vfs.OpMkdir
	open := func(fsys vfs.FS, hw *hwTable) (*Manager, error) {
		return OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get, NoBackground: true,
			ConfigFor: func(string) Config { return smallConfig() }})
	}
	var olds, news, none int
	for step := 0; ; step++ {
		mem := newMem(t)
		ffs := vfs.NewFaultFS(mem)
		hw := &hwTable{m: map[TopicPartition]int64{}}
		m, err := open(ffs, hw)
		if err != nil {
			t.Fatal(err)
		}
		old, err := m.GetOrCreate(tpA, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		oldLEO := fill(t, old, 20, 3, 40)
		oldBatches := map[int64][]byte{}
		for _, b := range readAll(t, old, 0, oldLEO, 1<<20) {
			oldBatches[b.BaseOffset()] = bytes.Clone(b)
		}
		if err := old.AdvanceLogStartOffset(45, oldLEO); err != nil {
			t.Fatal(err)
		}
		hw.set(tpA, oldLEO)
		if err := errors.Join(old.Flush(), m.CheckpointRecoveryPoints(), m.CheckpointHighWatermarks()); err != nil {
			t.Fatal(err)
		}

		ffs.Inject(vfs.Fault{Ops: mutating, Skip: step, Err: errCrash})
		newBatches := map[int64][]byte{}
		err = m.Delete(tpA)
		if err == nil {
			delete(hw.m, tpA)
			var l *Log
			if l, err = m.GetOrCreate(tpA, smallConfig()); err == nil {
				for i := 0; i < 4 && err == nil; i++ {
					var info AppendInfo
					if info, err = l.AppendAsLeader(plain(3, 41, int64(9000+i)).build(), 0); err == nil {
						res, _ := l.Read(info.FirstOffset, 1, l.LogEndOffset())
						newBatches[info.FirstOffset] = bytes.Clone(res.Records)
					}
				}
				hw.set(tpA, 3)
				if err == nil {
					err = l.Flush()
				}
			}
		}
		done := err == nil
		if err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("step %d: %v", step, err)
		}
		m.Abandon()
		for seed := uint64(1); seed <= 4; seed++ {
			crashed := mem.CrashClone(seed + uint64(step)*10)
			m2, err := open(crashed, &hwTable{m: map[TopicPartition]int64{}})
			if err != nil {
				t.Fatalf("step %d seed %d: reopen: %v", step, seed, err)
			}
			r, ok := m2.Log(tpA)
			if !ok {
				if len(m2.Offline()) > 0 {
					t.Fatalf("step %d seed %d: offline: %v", step, seed, m2.Offline())
				}
				if done {
					t.Fatalf("step %d seed %d: the flushed new log is gone", step, seed)
				}
				none++
				m2.Close()
				continue
			}
			start, end := r.LogStartOffset(), r.LogEndOffset()
			got := readAll(t, r, start, end, 1<<20)
			isNew := start < 45 || end < 45 // the old log starts at 45 and holds 60 records
			h, _ := m2.RecoveredHighWatermark(tpA)
			if isNew {
				news++
				if start != 0 || r.RecoveryPoint() > end || h > min(3, end) {
					t.Fatalf("step %d seed %d: the new log has start %d, recovery point %d, HW %d, LEO %d: the deleted log's checkpoints applied",
						step, seed, start, r.RecoveryPoint(), h, end)
				}
				for _, b := range got {
					if !bytes.Equal(b, newBatches[b.BaseOffset()]) {
						t.Fatalf("step %d seed %d: batch at %d is not the new log's", step, seed, b.BaseOffset())
					}
				}
				if done && end != 12 {
					t.Fatalf("step %d seed %d: flushed new log ends at %d, want 12", step, seed, end)
				}
			} else {
				olds++
				if done || start != 45 || end != oldLEO {
					t.Fatalf("step %d seed %d: old log [%d, %d) after the crash (done %v)", step, seed, start, end, done)
				}
				for _, b := range got {
					if !bytes.Equal(b, oldBatches[b.BaseOffset()]) {
						t.Fatalf("step %d seed %d: batch at %d is not the old log's", step, seed, b.BaseOffset())
					}
				}
			}
			m2.Close()
		}
		if done {
			t.Logf("%d crash points: %d reopened the old log, %d none, %d the new one", step, olds, none, news)
			if olds == 0 || none == 0 || news == 0 {
				t.Fatal("the crash points missed a case")
			}
			return
		}
	}
}

// The HW checkpoint asks the getter for every open log without the
// Manager's lock; a partition deleted and created again between that read
// and the write must not be written with the deleted log's HW (after a
// crash the new log would serve records not yet replicated as committed).
// The getter here deletes and recreates the partition the moment it is
// asked, the widest form of that window.
func TestAHighWatermarkReadFromADeletedLogIsNotWrittenForItsSuccessor(t *testing.T) {
	fsys := newMem(t)
	var m *Manager
	recreated := false
	getter := func(tp TopicPartition) (int64, bool) {
		if tp == tpA && !recreated {
			recreated = true
			if err := m.Delete(tpA); err != nil {
				t.Error(err)
			}
			if _, err := m.GetOrCreate(tpA, smallConfig()); err != nil {
				t.Error(err)
			}
			return 60, true // the deleted log's HW
		}
		return 0, false
	}
	var err error
	m, err = OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: getter, NoBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	old, err := m.GetOrCreate(tpA, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	fill(t, old, 20, 3, 40) // offsets [0, 60)
	if err := m.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	l, ok := m.Log(tpA)
	if !ok || l == old {
		t.Fatal("the partition was not created again")
	}
	fill(t, l, 4, 3, 40) // offsets [0, 12), none committed
	m.Abandon()

	m2 := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	defer m2.Close()
	if h, _ := m2.RecoveredHighWatermark(tpA); h > 0 {
		t.Fatalf("recovered HW %d for the new log: the deleted log's HW was written for it", h)
	}
}

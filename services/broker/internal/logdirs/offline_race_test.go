package logdirs

import (
	"runtime"
	"syscall"
	"testing"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

// seed creates tps with one record each in a directory of its own, closes it.
func seed(t *testing.T, fsys vfs.FS, path string, tps ...TopicPartition) {
	t.Helper()
	ds, err := Open([]string{path}, Options{Manager: func(string) logstore.ManagerOptions {
		return logstore.ManagerOptions{FS: fsys, NoBackground: true}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range tps {
		l, err := ds.GetOrCreate(tp, logstore.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(batch("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
}

func openAB(t *testing.T, mem vfs.FS, faults *vfs.FaultFS, sink *offlineSink) *Dirs {
	t.Helper()
	ds, err := Open([]string{"/a", "/b"}, Options{
		Manager: func(path string) logstore.ManagerOptions {
			o := logstore.ManagerOptions{FS: mem, NoBackground: true}
			if path == "/b" && faults != nil {
				o.FS = faults
			}
			return o
		},
		OnOffline: sink.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ds.Close() })
	return ds
}

// A partition whose log could not be opened at startup (it is in the dir's
// Manager.Offline) stays offline when its whole dir later goes offline: it
// is reported to the owner, stays in Offline(), and GetOrCreate refuses it;
// before, it was forgotten and got a fresh empty log on the healthy dir.
func TestUnopenablePartitionSurvivesItsDirGoingOffline(t *testing.T) {
	mem := vfs.NewMem()
	seed(t, mem, "/b", tp1, tp2)
	// Corrupt tp2's leader-epoch-checkpoint: its log cannot be opened.
	f, err := mem.Create("/b/" + tp2.String() + "/leader-epoch-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("0\n1\n1 x\n"), 0)
	f.Close()

	faults := vfs.NewFaultFS(mem)
	sink := &offlineSink{}
	ds := openAB(t, mem, faults, sink)
	if _, ok := ds.Offline()[tp2]; !ok {
		t.Fatalf("setup: tp2 should be offline at startup, Offline()=%v", ds.Offline())
	}
	l1, ok := ds.Log(tp1)
	if !ok {
		t.Fatal("setup: tp1 not open")
	}
	faults.Inject(vfs.Fault{Ops: vfs.OpWrite, Path: "/b/", Err: syscall.EIO})
	if _, err := l1.AppendAsLeader(batch("y"), 0); kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("append: %v", err)
	}
	off := sink.wait(t)
	reported := false
	for _, tp := range off.Partitions {
		reported = reported || tp == tp2
	}
	if _, ok := ds.Offline()[tp2]; !ok {
		t.Errorf("tp2 dropped out of Offline() once /b went offline: %v", ds.Offline())
	}
	if _, err := ds.GetOrCreate(tp2, logstore.DefaultConfig()); kerr.CodeOf(err) != kerr.KafkaStorageError {
		d := ds.holder(tp2)
		where := "<none>"
		if d != nil {
			where = d.path
		}
		t.Errorf("GetOrCreate(tp2) after /b went offline: err=%v, log created on %s; want KAFKA_STORAGE_ERROR", err, where)
	}
	if !reported {
		t.Errorf("offline report %v does not list tp2", off.Partitions)
	}
}

// Between a dir being marked offline and its partitions being recorded as
// offline, GetOrCreate for one of them answers KAFKA_STORAGE_ERROR: it found
// no holder (the dir is skipped as offline) and created a fresh empty log on
// another dir, which Log() then served for good.
func TestGetOrCreateWhileADirGoesOfflineCreatesNothingElsewhere(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	mem := vfs.NewMem()
	seed(t, mem, "/b", tp1)
	sink := &offlineSink{}
	ds := openAB(t, mem, nil, sink)
	var b *dir
	for _, d := range ds.dirs {
		if d.path == "/b" {
			b = d
		}
	}
	// What a log operation's OnStorageError does, e.g. an append's EIO.
	ds.fail(b, syscall.EIO)
	l, err := ds.GetOrCreate(tp1, logstore.DefaultConfig())
	sink.wait(t)
	if err == nil {
		t.Errorf("GetOrCreate(tp1) right after /b failed: created a log (LEO %d) on %s; want KAFKA_STORAGE_ERROR", l.LogEndOffset(), ds.holder(tp1).path)
	}
	if l2, ok := ds.Log(tp1); ok {
		t.Errorf("after /b is offline, Log(tp1) still serves a log with LEO %d (the real one had 1 record)", l2.LogEndOffset())
	}
}

// A partition present in two dirs at startup (a stale copy) stops Open,
// naming both dirs, as Kafka refuses to start ("Duplicate log directories
// for ... are found"): the first dir's copy was served, whatever the other
// held.
func TestAPartitionInTwoDirsStopsTheStart(t *testing.T) {
	mem := vfs.NewMem()
	seed(t, mem, "/a", tp0)           // stale: 1 record
	seed(t, mem, "/b", tp0, tp0, tp0) // just to create it
	// give /b's copy more records
	ds0, err := Open([]string{"/b"}, Options{Manager: func(string) logstore.ManagerOptions {
		return logstore.ManagerOptions{FS: mem, NoBackground: true}
	}})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ds0.Log(tp0)
	for i := 0; i < 4; i++ {
		if _, err := l.AppendAsLeader(batch("y"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds0.Close(); err != nil {
		t.Fatal(err)
	}

	ds, err := Open([]string{"/a", "/b"}, Options{Manager: func(string) logstore.ManagerOptions {
		return logstore.ManagerOptions{FS: mem, NoBackground: true}
	}})
	if err != nil {
		return // refusing to start is Kafka's answer
	}
	defer ds.Close()
	if _, err := ds.GetOrCreate(tp0, logstore.DefaultConfig()); err != nil {
		return // refusing the partition is acceptable too
	}
	l, _ = ds.Log(tp0)
	t.Errorf("tp0 is in /a (LEO 1) and /b (LEO 5); Open accepted both and serves the copy in %s with LEO %d; Partitions()=%v",
		ds.holder(tp0).path, l.LogEndOffset(), ds.Partitions())
}

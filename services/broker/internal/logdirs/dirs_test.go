package logdirs

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func batch(v string) []byte {
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: 1, Value: []byte(v)})
	return b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
}

type offlineSink struct {
	mu  sync.Mutex
	got []Offline
}

func (s *offlineSink) add(o Offline) { s.mu.Lock(); s.got = append(s.got, o); s.mu.Unlock() }

func (s *offlineSink) wait(t *testing.T) Offline {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		if len(s.got) > 0 {
			o := s.got[0]
			s.mu.Unlock()
			return o
		}
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no directory went offline")
	return Offline{}
}

// openTwo opens /a (plain) and /b (faults injectable) on one in-memory disk.
func openTwo(t *testing.T, sink *offlineSink) (*Dirs, *vfs.FaultFS) {
	t.Helper()
	mem := vfs.NewMem()
	faults := vfs.NewFaultFS(mem)
	ds, err := Open([]string{"/a", "/b"}, Options{
		Manager: func(path string) logstore.ManagerOptions {
			o := logstore.ManagerOptions{FS: mem, NoBackground: true}
			if path == "/b" {
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
	return ds, faults
}

var (
	tp0 = TopicPartition{Topic: "t", Partition: 0}
	tp1 = TopicPartition{Topic: "t", Partition: 1}
	tp2 = TopicPartition{Topic: "t", Partition: 2}
)

// New logs go to the directory with the fewest partitions. A write error
// in one directory takes it offline: its partitions answer
// KAFKA_STORAGE_ERROR, the owner hears which they were, the other
// directory keeps serving and takes the new partitions.
func TestAStorageErrorTakesItsDirectoryOffline(t *testing.T) {
	sink := &offlineSink{}
	ds, faults := openTwo(t, sink)
	cfg := logstore.DefaultConfig()
	la, err := ds.GetOrCreate(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := ds.GetOrCreate(tp1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ds.States() {
		if s.Partitions != 1 || s.Err != nil {
			t.Fatalf("placement: %+v, want one partition in each directory", ds.States())
		}
	}
	if _, err := la.AppendAsLeader(batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	onB := tp1
	if !strings.HasPrefix(ds.holder(tp1).path, "/b") {
		onB, la, lb = tp0, lb, la
	}

	faults.Inject(vfs.Fault{Ops: vfs.OpWrite, Path: "/b/", Err: syscall.EIO})
	if _, err := lb.AppendAsLeader(batch("b"), 0); kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("append on the failing disk: %v", err)
	}
	off := sink.wait(t)
	if off.Dir != "/b" || len(off.Partitions) != 1 || off.Partitions[0] != onB || !strings.Contains(off.Err.Error(), "input/output error") {
		t.Fatalf("offline report %+v", off)
	}
	if _, err := ds.GetOrCreate(onB, cfg); kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("the offline directory's partition: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if err := ds.OfflinePartition(onB); err == nil {
		t.Fatal("OfflinePartition does not report it")
	}
	if got := ds.Partitions(); len(got) != 1 || got[0] == onB {
		t.Fatalf("partitions served: %v", got)
	}
	if od := ds.OfflineDirs(); len(od) != 1 || od[0].Dir != "/b" {
		t.Fatalf("offline dirs %+v", od)
	}
	// The other directory serves, and takes the new partitions.
	if _, err := la.AppendAsLeader(batch("a2"), 0); err != nil {
		t.Fatalf("append on the healthy directory: %v", err)
	}
	if _, err := ds.GetOrCreate(tp2, cfg); err != nil {
		t.Fatal(err)
	}
	if d := ds.holder(tp2); d == nil || d.path != "/a" {
		t.Fatal("the new partition did not go to the online directory")
	}
}

// A directory that cannot be opened at startup is offline from the start;
// the broker serves the other one, but creates no new log, since the
// partition asked for may be one whose log is on the unreadable disk.
func TestADirectoryUnreadableAtStartup(t *testing.T) {
	mem := vfs.NewMem()
	broken := vfs.NewFaultFS(mem)
	broken.Inject(vfs.Fault{Ops: vfs.OpReadDir, Path: "/b", Err: syscall.EIO})
	mk := func(paths ...string) (*Dirs, error) {
		return Open(paths, Options{Manager: func(path string) logstore.ManagerOptions {
			o := logstore.ManagerOptions{FS: mem, NoBackground: true}
			if path == "/b" {
				o.FS = broken
			}
			return o
		}})
	}
	first, err := mk("/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.GetOrCreate(tp0, logstore.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	ds, err := mk("/a", "/b")
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if od := ds.OfflineDirs(); len(od) != 1 || od[0].Dir != "/b" {
		t.Fatalf("offline dirs %+v", od)
	}
	if _, err := ds.GetOrCreate(tp0, logstore.DefaultConfig()); err != nil {
		t.Fatalf("the healthy directory's partition: %v", err)
	}
	if _, err := ds.GetOrCreate(tp1, logstore.DefaultConfig()); kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("a new partition while a directory is unreadable: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if _, err := mk("/b"); err == nil {
		t.Fatal("Open succeeded with every directory unreadable")
	}
}

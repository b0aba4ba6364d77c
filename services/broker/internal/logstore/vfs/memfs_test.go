package vfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"testing"
)

// exercise runs the same basic contract against any FS.
func exercise(t *testing.T, fsys FS, root string) {
	t.Helper()
	dir := root + "/d/e"
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(dir + "/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XY"), 7); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 9 {
		t.Fatalf("size %d, want 9", sz)
	}
	buf := make([]byte, 9)
	if n, err := f.ReadAt(buf, 0); n != 9 || err != nil && err != io.EOF {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(buf, []byte("hello\x00\x00XY")) {
		t.Fatalf("contents %q", buf)
	}
	if n, err := f.ReadAt(buf, 5); n != 4 || err != io.EOF {
		t.Fatalf("short ReadAt = %d, %v; want 4, EOF", n, err)
	}
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(dir+"/a", dir+"/b"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(fsys, dir+"/b")
	if err != nil || string(got) != "hel" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := fsys.Stat(dir + "/a"); !IsNotExist(err) {
		t.Fatalf("Stat of renamed file: %v", err)
	}
	ents, err := fsys.ReadDir(root + "/d")
	if err != nil || len(ents) != 1 || ents[0].Name() != "e" || !ents[0].IsDir() {
		t.Fatalf("ReadDir = %v, %v", ents, err)
	}
	if err := WriteFileAtomic(fsys, dir, "c", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadFile(fsys, dir+"/c"); string(got) != "v1" {
		t.Fatalf("atomic file = %q", got)
	}
	if _, err := fsys.Open(dir + "/missing"); !IsNotExist(err) {
		t.Fatalf("Open missing: %v", err)
	}
	ro, err := fsys.OpenReadOnly(dir + "/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("write through a read-only handle succeeded")
	}
	ro.Close()
	if err := fsys.Remove(dir + "/b"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.RemoveAll(root + "/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(root + "/d"); !IsNotExist(err) {
		t.Fatalf("Stat after RemoveAll: %v", err)
	}
}

func TestMemFSContract(t *testing.T) { exercise(t, NewMem(), "/data") }

func TestOSFSContract(t *testing.T) { exercise(t, OS, filepath.ToSlash(t.TempDir())) }

func TestMemFileClosedAndRemoved(t *testing.T) {
	m := NewMem()
	f, _ := m.Create("/x")
	f.WriteAt([]byte("abc"), 0)
	if err := m.Remove("/x"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abc" {
		t.Fatalf("read after remove: %q %v", buf, err)
	}
	f.Close()
	if _, err := f.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestCrashKeepsSyncedData(t *testing.T) {
	for seed := range uint64(50) {
		m := NewMem()
		MkdirAllDurable(m, "/d")
		f, _ := m.Create("/d/f")
		f.WriteAt([]byte("durable-"), 0)
		f.Sync()
		m.SyncDir("/d")
		f.WriteAt(bytes.Repeat([]byte("u"), 3000), 8)
		g, _ := m.Create("/d/unsynced-entry")
		g.WriteAt([]byte("x"), 0)
		g.Sync()

		c := m.CrashClone(seed)
		got, err := ReadFile(c, "/d/f")
		if err != nil {
			t.Fatalf("seed %d: synced file lost: %v", seed, err)
		}
		if !bytes.HasPrefix(got, []byte("durable-")) || len(got) > 3008 {
			t.Fatalf("seed %d: contents %q...", seed, got[:min(len(got), 20)])
		}
		for i, c := range got[8:] {
			if c != 'u' && c != 0 {
				t.Fatalf("seed %d: byte %d is %q: not written, not zero", seed, 8+i, c)
			}
		}
	}
}

func TestCrashOutcomesVary(t *testing.T) {
	kept, lost, torn, entryLost := 0, 0, 0, 0
	for seed := range uint64(200) {
		m := NewMem()
		MkdirAllDurable(m, "/d")
		f, _ := m.Create("/d/f")
		m.SyncDir("/d")
		f.WriteAt(bytes.Repeat([]byte("u"), 4096), 0)
		m.Create("/d/new")
		c := m.CrashClone(seed)
		got, _ := ReadFile(c, "/d/f")
		switch {
		case len(got) == 4096 && bytes.Count(got, []byte("u")) == 4096:
			kept++
		case len(got) == 0:
			lost++
		default:
			torn++
		}
		if _, err := c.Stat("/d/new"); IsNotExist(err) {
			entryLost++
		}
	}
	if kept == 0 || lost == 0 || torn == 0 || entryLost == 0 || entryLost == 200 {
		t.Fatalf("outcomes kept %d lost %d torn %d entry lost %d: every kind must occur", kept, lost, torn, entryLost)
	}
}

func TestCrashAtomicWriteIsOldOrNew(t *testing.T) {
	for seed := range uint64(100) {
		m := NewMem()
		MkdirAllDurable(m, "/d")
		if err := WriteFileAtomic(m, "/d", "cp", []byte("old")); err != nil {
			t.Fatal(err)
		}
		f, _ := m.Create("/d/cp.tmp")
		f.WriteAt([]byte("new"), 0)
		f.Sync()
		m.Rename("/d/cp.tmp", "/d/cp") // crash before SyncDir
		got, err := ReadFile(m.CrashClone(seed), "/d/cp")
		if err != nil || (string(got) != "old" && string(got) != "new") {
			t.Fatalf("seed %d: %q, %v", seed, got, err)
		}
	}
}

func TestCrashUnsyncedTruncateMayRevert(t *testing.T) {
	reverted := false
	for seed := range uint64(50) {
		m := NewMem()
		MkdirAllDurable(m, "/d")
		f, _ := m.Create("/d/f")
		f.WriteAt([]byte("abcdef"), 0)
		f.Sync()
		m.SyncDir("/d")
		f.Truncate(2)
		got, _ := ReadFile(m.CrashClone(seed), "/d/f")
		if string(got) == "abcdef" {
			reverted = true
			continue
		}
		if len(got) < 2 || len(got) > 6 || string(got[:2]) != "ab" {
			t.Fatalf("seed %d: %q", seed, got)
		}
		for i := 2; i < len(got); i++ {
			if got[i] != 0 && got[i] != "abcdef"[i] {
				t.Fatalf("seed %d: byte %d is %q", seed, i, got[i])
			}
		}
	}
	if !reverted {
		t.Fatal("an unsynced truncate never reverted")
	}
}

func TestFaultFS(t *testing.T) {
	m := NewMem()
	ffs := NewFaultFS(m)
	ffs.MkdirAll("/d")
	f, _ := ffs.Create("/d/seg.log")
	remove := ffs.Inject(Fault{Ops: OpWrite, Path: ".log", Skip: 1, Count: 1, Err: syscall.ENOSPC, Partial: true})
	if _, err := f.WriteAt([]byte("1234"), 0); err != nil {
		t.Fatalf("first write: %v", err)
	}
	n, err := f.WriteAt([]byte("5678"), 4)
	if !errors.Is(err, syscall.ENOSPC) || n != 2 {
		t.Fatalf("second write = %d, %v; want 2, ENOSPC", n, err)
	}
	if _, err := f.WriteAt([]byte("5678"), 4); err != nil {
		t.Fatalf("third write after Count ran out: %v", err)
	}
	remove()
	ffs.Inject(Fault{Ops: OpSync | OpReadDir, Err: syscall.EIO})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: %v", err)
	}
	if _, err := ffs.ReadDir("/d"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("readdir: %v", err)
	}
	ffs.Clear()
	if err := f.Sync(); err != nil {
		t.Fatalf("sync after Clear: %v", err)
	}
}

// A crash keeps an unsynced rename whole or not at all: the file is found
// under its old name or its new one, never under neither or both.
func TestCrashKeepsRenamesWhole(t *testing.T) {
	before, after := 0, 0
	for seed := range uint64(100) {
		m := NewMem()
		MkdirAllDurable(m, "/d")
		f, _ := m.Create("/d/a.swap")
		f.WriteAt([]byte("data"), 0)
		f.Sync()
		m.SyncDir("/d")
		if err := m.Rename("/d/a.swap", "/d/a"); err != nil {
			t.Fatal(err)
		}
		c := m.CrashClone(seed)
		_, errOld := c.Stat("/d/a.swap")
		_, errNew := c.Stat("/d/a")
		switch {
		case errOld == nil && errNew != nil:
			before++
		case errOld != nil && errNew == nil:
			after++
		default:
			t.Fatalf("seed %d: old name there: %v, new name there: %v", seed, errOld == nil, errNew == nil)
		}
	}
	if before == 0 || after == 0 {
		t.Fatalf("%d crashes kept the old name, %d the new: no variety", before, after)
	}
}

// A new directory's entry is durable only once its parent is synced: a
// power loss before may take the directory away, with the files synced in
// it. MkdirAllDurable syncs the parents of every level it creates.
func TestCrashMayLoseANewDirectoryUntilItsParentIsSynced(t *testing.T) {
	write := func(m *MemFS, name string) {
		f, err := m.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("data"), 0)
		f.Sync()
		m.SyncDir(path.Dir(name))
	}
	lost := 0
	for seed := range uint64(50) {
		m := NewMem()
		MkdirAllDurable(m, "/data")
		if err := MkdirAllDurable(m, "/data/p-1/sub"); err != nil {
			t.Fatal(err)
		}
		write(m, "/data/p-1/sub/f")
		m.MkdirAll("/data/p-0") // after: syncing /data would keep it
		write(m, "/data/p-0/f")
		c := m.CrashClone(seed)
		if _, err := c.Stat("/data/p-0/f"); err != nil {
			lost++
		}
		if b, err := ReadFile(c, "/data/p-1/sub/f"); err != nil || string(b) != "data" {
			t.Fatalf("seed %d: %q, %v under directories MkdirAllDurable made", seed, b, err)
		}
	}
	if lost == 0 || lost == 50 {
		t.Fatalf("the unsynced directory was lost after %d crashes of 50, want some", lost)
	}
}

// A parent sync that fails leaves no directory behind: the next call
// creates it again and syncs its parent. The directory was left in place,
// and the next call, finding it, returned at once with its entry never
// made durable, so a power loss could take it and what was synced in it.
func TestMkdirAllDurableRetriesAfterAFailedParentSync(t *testing.T) {
	for seed := range uint64(20) {
		m := NewMem()
		MkdirAllDurable(m, "/data")
		ffs := NewFaultFS(m)
		remove := ffs.Inject(Fault{Ops: OpSyncDir, Count: 1, Err: syscall.EIO})
		if err := MkdirAllDurable(ffs, "/data/p-1"); !errors.Is(err, syscall.EIO) {
			t.Fatalf("the first call with a failing sync: %v", err)
		}
		remove()
		if _, err := m.Stat("/data/p-1"); err == nil {
			t.Fatal("a directory whose parent could not be synced was left behind")
		}
		if err := MkdirAllDurable(ffs, "/data/p-1"); err != nil {
			t.Fatal(err)
		}
		f, err := m.Create("/data/p-1/f")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("data"), 0)
		f.Sync()
		m.SyncDir("/data/p-1")
		if b, err := ReadFile(m.CrashClone(seed), "/data/p-1/f"); err != nil || string(b) != "data" {
			t.Fatalf("seed %d: %q, %v after the retried call", seed, b, err)
		}
	}
}

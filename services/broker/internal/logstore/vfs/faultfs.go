package vfs

import (
	"io/fs"
	"strings"
	"sync"
)

// Op is a set of file-system operations a Fault applies to.
type Op uint32

const (
	OpCreate Op = 1 << iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRename
	OpRemove
	OpReadDir
	OpMkdir
	OpSyncDir
	OpStat
	OpWriteback
	OpAll Op = 1<<iota - 1
)

var opNames = map[Op]string{
	OpCreate: "create", OpOpen: "open", OpRead: "read", OpWrite: "write", OpSync: "sync",
	OpTruncate: "truncate", OpRename: "rename", OpRemove: "remove", OpReadDir: "readdir",
	OpMkdir: "mkdir", OpSyncDir: "syncdir", OpStat: "stat", OpWriteback: "writeback",
}

// Fault describes errors to inject: matching operations on paths containing
// Path skip the first Skip matches, then fail Count times (0 = forever) with
// Err. With Partial, a failing write first writes half its bytes, as a disk
// filling up mid-write does. With Stall, a matching operation first waits
// until Stall is closed (a slow disk), then fails with Err, or proceeds
// when Err is nil.
type Fault struct {
	Ops     Op
	Path    string
	Skip    int
	Count   int
	Err     error
	Partial bool
	Stall   <-chan struct{}
}

type faultState struct {
	Fault
	seen, failed int
}

// FaultFS wraps an FS and fails operations as told by injected Faults.
type FaultFS struct {
	inner  FS
	mu     sync.Mutex
	faults []*faultState
	fired  int
}

// NewFaultFS wraps inner; with no faults injected it behaves exactly like inner.
func NewFaultFS(inner FS) *FaultFS { return &FaultFS{inner: inner} }

// Inject adds a fault and returns a function that removes it.
func (f *FaultFS) Inject(fault Fault) (remove func()) {
	st := &faultState{Fault: fault}
	f.mu.Lock()
	f.faults = append(f.faults, st)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, s := range f.faults {
			if s == st {
				f.faults = append(f.faults[:i], f.faults[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every fault.
func (f *FaultFS) Clear() {
	f.mu.Lock()
	f.faults = nil
	f.mu.Unlock()
}

// Fired returns how many operations a fault has applied to so far.
func (f *FaultFS) Fired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

// check returns the fault to apply to op on name, if any.
func (f *FaultFS) check(op Op, name string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.faults {
		if s.Ops&op == 0 || !strings.Contains(name, s.Path) {
			continue
		}
		s.seen++
		if s.seen <= s.Skip || (s.Count > 0 && s.failed >= s.Count) {
			continue
		}
		s.failed++
		f.fired++
		fault := s.Fault
		return &fault
	}
	return nil
}

func (f *FaultFS) fail(op Op, name string) error {
	ft := f.check(op, name)
	if ft == nil {
		return nil
	}
	if ft.Stall != nil {
		<-ft.Stall
	}
	if ft.Err == nil {
		return nil
	}
	return &fs.PathError{Op: opNames[op], Path: name, Err: ft.Err}
}

func (f *FaultFS) wrap(file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *FaultFS) Create(name string) (File, error) {
	if err := f.fail(OpCreate, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Create(name))
}

func (f *FaultFS) Open(name string) (File, error) {
	if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Open(name))
}

func (f *FaultFS) OpenReadOnly(name string) (File, error) {
	if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.OpenReadOnly(name))
}

func (f *FaultFS) Rename(oldname, newname string) error {
	if err := f.fail(OpRename, newname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

func (f *FaultFS) Remove(name string) error {
	if err := f.fail(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *FaultFS) RemoveAll(name string) error {
	if err := f.fail(OpRemove, name); err != nil {
		return err
	}
	return f.inner.RemoveAll(name)
}

func (f *FaultFS) MkdirAll(dir string) error {
	if err := f.fail(OpMkdir, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

func (f *FaultFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := f.fail(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(dir)
}

func (f *FaultFS) SyncDir(dir string) error {
	if err := f.fail(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

func (f *FaultFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.fail(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

type faultFile struct {
	File
	fs *FaultFS
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if ft := f.fs.check(OpWrite, f.Name()); ft != nil {
		if ft.Stall != nil {
			<-ft.Stall
		}
		if ft.Err == nil {
			return f.File.WriteAt(p, off)
		}
		n := 0
		if ft.Partial && len(p) > 1 {
			n, _ = f.File.WriteAt(p[:len(p)/2], off)
		}
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: ft.Err}
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.fail(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

// StartWriteback passes on to the inner file when it can start writeback.
func (f *faultFile) StartWriteback(off, n int64) error {
	if err := f.fs.fail(OpWriteback, f.Name()); err != nil {
		return err
	}
	return StartWriteback(f.File, off, n)
}

// DropCache passes on to the inner file when it can drop cached pages
// (advisory, as StartWriteback: no fault is injected).
func (f *faultFile) DropCache(off, n int64) error { return DropCache(f.File, off, n) }

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.fail(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

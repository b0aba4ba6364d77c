package vfs

import (
	"io/fs"
	"os"

	"tidemark.io/services/broker/internal/aiofsync"
	"tidemark.io/services/broker/internal/parkedfs"
)

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

// Sync parks the calling goroutine while the device works (aiofsync): a
// plain fsync would hold its P, and a GOMAXPROCS-1 broker would stand
// still for as long as the runtime takes to notice (10-20 ms when busy).
func (f osFile) Sync() error { return aiofsync.Sync(f.File) }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenReadOnly(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename, Remove, RemoveAll and Truncate park the calling goroutine while
// the file system works (parkedfs): each may free a file's blocks, which on
// a file system mounted with discard waits for the device.
func (osFS) Rename(oldname, newname string) error { return parkedfs.Rename(oldname, newname) }
func (osFS) Remove(name string) error             { return parkedfs.Remove(name) }
func (osFS) RemoveAll(name string) error          { return parkedfs.RemoveAll(name) }

func (f osFile) Truncate(size int64) error { return parkedfs.Truncate(f.File, size) }

func (osFS) MkdirAll(dir string) error                 { return os.MkdirAll(dir, 0o755) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }
func (osFS) Stat(name string) (fs.FileInfo, error)     { return os.Stat(name) }

func (osFS) SyncDir(dir string) error { return aiofsync.SyncDir(dir) }

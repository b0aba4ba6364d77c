// Package vfs is the file-system seam of the partition log: every byte the
// log stores or reads goes through FS, so tests can swap the operating
// system for an in-memory file system that loses unsynced data on a simulated
// crash (MemFS.CrashClone) or fails chosen operations (FaultFS).
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path"
)

// File is an open file. Writes are positional: the log always knows where
// its data ends, so a failed write never moves a hidden file offset.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync MUST NOT return until the file's data and size are on stable
	// storage. Its name in a directory is durable only after SyncDir.
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Name() string
}

// FS is the set of file-system operations the log uses. Names are slash
// separated; relative names are relative to the process's working directory
// (OS) or to the root (MemFS).
type FS interface {
	// Create creates or truncates name and opens it for reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file for reading and writing.
	Open(name string) (File, error)
	// OpenReadOnly opens an existing file for reading.
	OpenReadOnly(name string) (File, error)
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a directory tree; a missing name is not an error.
	RemoveAll(name string) error
	MkdirAll(dir string) error
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]fs.DirEntry, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
	Stat(name string) (fs.FileInfo, error)
}

// MkdirAllDurable is MkdirAll that also makes the directories it creates
// durable: the parent of each is synced, so a power loss cannot take a new
// directory away, with the files synced in it since. A directory that
// already exists costs one Stat. When a sync fails the directories it
// created are removed again (best effort), so that a later call, finding
// them missing, creates and syncs them anew rather than trusting an entry
// that may not survive a power loss.
func MkdirAllDurable(fsys FS, dir string) error {
	var created []string // the missing ones, the deepest first
	for d := path.Clean(dir); ; d = path.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !IsNotExist(err) {
			return err
		}
		created = append(created, d)
		if path.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for _, d := range created {
		if err := fsys.SyncDir(path.Dir(d)); err != nil {
			for _, c := range created { // the deepest first: each is empty when removed
				fsys.Remove(c)
			}
			return err
		}
	}
	return nil
}

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenReadOnly(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return buf[:n], nil
}

// WritebackStarter is a File that can start writing a range of its dirty
// pages to the device without waiting for them (Linux: sync_file_range
// with SYNC_FILE_RANGE_WRITE). It makes nothing durable; it keeps the
// kernel from gathering a file's writes of many seconds into one burst.
type WritebackStarter interface {
	StartWriteback(off, n int64) error
}

// StartWriteback starts writeback of f's bytes [off, off+n) when f can,
// and does nothing when it cannot (MemFS; systems without the call).
func StartWriteback(f File, off, n int64) error {
	if w, ok := f.(WritebackStarter); ok {
		return w.StartWriteback(off, n)
	}
	return nil
}

// CacheDropper is a File that can drop a range of its pages from the page
// cache (Linux: posix_fadvise POSIX_FADV_DONTNEED). Only clean pages go:
// dirty ones and those still being written back stay, so nothing is lost;
// a later read of the range comes from the device.
type CacheDropper interface {
	DropCache(off, n int64) error
}

// DropCache drops f's cached pages of [off, off+n) when f can, and does
// nothing when it cannot (MemFS; systems without the call).
func DropCache(f File, off, n int64) error {
	if d, ok := f.(CacheDropper); ok {
		return d.DropCache(off, n)
	}
	return nil
}

// BlockReserver is a File that can reserve disk blocks for bytes it does
// not hold yet, keeping its size (Linux: fallocate with
// FALLOC_FL_KEEP_SIZE), and say how many bytes of blocks it has. Writing
// into reserved blocks allocates nothing, so the kernel's writeback of
// those bytes needs no block allocation; truncating the file to its size
// gives back what is reserved beyond it.
type BlockReserver interface {
	ReserveBlocks(n int64) error
	AllocatedBytes() (int64, error)
}

// ReserveBlocks reserves blocks for f's first n bytes when f can; ok is
// false when it cannot (MemFS; systems without the call; a wrapper whose
// file cannot answers errors.ErrUnsupported).
func ReserveBlocks(f File, n int64) (ok bool, err error) {
	if r, ok := f.(BlockReserver); ok {
		if err := r.ReserveBlocks(n); !errors.Is(err, errors.ErrUnsupported) {
			return true, err
		}
	}
	return false, nil
}

// AllocatedBytes returns the bytes of disk blocks f holds, its reserved
// ones included, when f can say; ok is false when it cannot.
func AllocatedBytes(f File) (n int64, ok bool, err error) {
	if r, ok := f.(BlockReserver); ok {
		if n, err := r.AllocatedBytes(); !errors.Is(err, errors.ErrUnsupported) {
			return n, true, err
		}
	}
	return 0, false, nil
}

// WriteFileAtomic replaces name with data so that after a crash either the
// old or the new contents are found, never a mix: it writes name+".tmp",
// syncs it, renames it over name and syncs the directory.
func WriteFileAtomic(fsys FS, dir, name string, data []byte) (err error) {
	path := dir + "/" + name
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err = f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// ReplaceFile is WriteFileAtomic without the fsyncs: the rename still
// replaces name whole for readers, but after a crash the file may be
// missing, old, or torn. For files whose reader checks them (a CRC) and
// whose writer syncs them later.
func ReplaceFile(fsys FS, dir, name string, data []byte) (err error) {
	path := dir + "/" + name
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err = f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, path)
}

// IsNotExist reports whether err says a file is missing.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

package parkedfs

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
)

// Remove deletes the named file or empty directory, as os.Remove does:
// unlink, then rmdir if that failed, with the error of whichever applies.
func Remove(name string) error {
	if r := sharedRing(); r != nil {
		if res, submitted := r.unlink(name, false); submitted {
			if res == 0 {
				parked.Add(1)
				return nil
			}
			e := syscall.Errno(-res)
			if e == syscall.ENOENT { // rmdir would say the same
				parked.Add(1)
				return &os.PathError{Op: "remove", Path: name, Err: e}
			}
			if res1, submitted := r.unlink(name, true); submitted {
				parked.Add(1)
				if res1 == 0 {
					return nil
				}
				// rmdir of a file says ENOTDIR: then unlink's error is the real one.
				if e1 := syscall.Errno(-res1); e1 != syscall.ENOTDIR {
					e = e1
				}
				return &os.PathError{Op: "remove", Path: name, Err: e}
			}
		}
	}
	plain.Add(1)
	return os.Remove(name)
}

// RemoveAll removes path and everything in it, as os.RemoveAll does: nil
// if path does not exist. Each file is removed with Remove.
func RemoveAll(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			if err := RemoveAll(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Rename renames (moves) oldpath to newpath, replacing newpath if it is a
// file, as rename(2) does.
func Rename(oldpath, newpath string) error {
	if r := sharedRing(); r != nil {
		if res, submitted := r.rename(oldpath, newpath); submitted {
			parked.Add(1)
			if res == 0 {
				return nil
			}
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.Errno(-res)}
		}
	}
	plain.Add(1)
	return os.Rename(oldpath, newpath)
}

// Truncate changes f's size, as f.Truncate does.
func Truncate(f *os.File, size int64) error {
	if size < 0 {
		return f.Truncate(size) // os's own error for it
	}
	if r := sharedRing(); r != nil {
		if res, submitted := r.truncate(f, size); submitted {
			parked.Add(1)
			if res == 0 {
				return nil
			}
			return &os.PathError{Op: "truncate", Path: f.Name(), Err: syscall.Errno(-res)}
		}
	}
	plain.Add(1)
	return f.Truncate(size)
}

var parked, plain atomic.Int64

// Counts says how many calls ran on the kernel's workers with the caller
// parked, and how many were plain system calls, since the process started.
func Counts() (parkedCalls, plainCalls int64) { return parked.Load(), plain.Load() }

// Available says whether calls park (the kernel took the ring), and if not
// why.
func Available() (bool, error) {
	if sharedRing() != nil {
		return true, nil
	}
	if ringErr == nil {
		return false, errors.New("no io_uring on this platform")
	}
	return false, ringErr
}

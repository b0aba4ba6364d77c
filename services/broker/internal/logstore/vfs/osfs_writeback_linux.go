package vfs

import "golang.org/x/sys/unix"

// StartWriteback asks the kernel to start writing the range back
// (sync_file_range with SYNC_FILE_RANGE_WRITE) and returns without waiting
// for the I/O. The file's descriptor is held for the call, so a concurrent
// Close cannot hand the call another file's descriptor.
func (f osFile) StartWriteback(off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var callErr error
	if err := rc.Control(func(fd uintptr) {
		callErr = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return err
	}
	return callErr
}

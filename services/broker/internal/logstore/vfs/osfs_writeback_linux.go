package vfs

import "golang.org/x/sys/unix"

// StartWriteback asks the kernel to start writing the range back
// (sync_file_range with SYNC_FILE_RANGE_WRITE) and returns without waiting
// for the I/O.
func (f osFile) StartWriteback(off, n int64) error {
	return f.withFd(func(fd int) error { return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE) })
}

// DropCache asks the kernel to drop the range's clean pages from the page
// cache (posix_fadvise POSIX_FADV_DONTNEED).
func (f osFile) DropCache(off, n int64) error {
	return f.withFd(func(fd int) error { return unix.Fadvise(fd, off, n, unix.FADV_DONTNEED) })
}

// ReserveBlocks reserves blocks for the file's first n bytes without
// changing its size (fallocate with FALLOC_FL_KEEP_SIZE).
func (f osFile) ReserveBlocks(n int64) error {
	return f.withFd(func(fd int) error { return unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, n) })
}

// AllocatedBytes returns the bytes of the blocks the file holds (st_blocks
// counts 512-byte units).
func (f osFile) AllocatedBytes() (int64, error) {
	var st unix.Stat_t
	err := f.withFd(func(fd int) error { return unix.Fstat(fd, &st) })
	return st.Blocks * 512, err
}

// withFd runs call on the file's descriptor, held for the call, so a
// concurrent Close cannot hand the call another file's descriptor.
func (f osFile) withFd(call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var callErr error
	if err := rc.Control(func(fd uintptr) { callErr = call(int(fd)) }); err != nil {
		return err
	}
	return callErr
}

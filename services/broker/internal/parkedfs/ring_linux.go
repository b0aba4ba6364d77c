//go:build linux

package parkedfs

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI (include/uapi/linux/io_uring.h).
const (
	opRenameat  = 35 // IORING_OP_RENAMEAT, Linux 5.11
	opUnlinkat  = 36 // IORING_OP_UNLINKAT, Linux 5.11
	opFtruncate = 55 // IORING_OP_FTRUNCATE, Linux 6.9

	featSingleMmap         = 1 << 0 // IORING_FEAT_SINGLE_MMAP: one mapping for both rings
	offSQEs                = 0x10000000
	registerEventfd        = 4  // IORING_REGISTER_EVENTFD
	registerProbe          = 8  // IORING_REGISTER_PROBE
	registerIOWQMaxWorkers = 19 // IORING_REGISTER_IOWQ_MAX_WORKERS
	probeOpSupported       = 1  // IO_URING_OP_SUPPORTED
)

const (
	// sqEntries is the submission ring's size; the completion ring is
	// twice it, and at most that many calls are in flight (more wait for a
	// slot), so completions never overflow.
	sqEntries = 64
	// maxWorkers bounds the kernel threads running the calls: block
	// freeing is the device's work, and more threads would only queue
	// there.
	maxWorkers = 4
)

// sqe is struct io_uring_sqe.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64 // off, addr2
	addr        uint64
	len         uint32
	opFlags     uint32 // rename_flags, unlink_flags, ...
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32 // the call's result, or -errno
	flags    uint32
}

// sqOffsets and cqOffsets are struct io_sqring_offsets and
// io_cqring_offsets: where each field of a ring is in its mapping.
type sqOffsets struct {
	head, tail, mask, entries, flags, dropped, array, resv uint32
	userAddr                                               uint64
}

type cqOffsets struct {
	head, tail, mask, entries, overflow, cqes, flags, resv uint32
	userAddr                                               uint64
}

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sq                                                                     sqOffsets
	cq                                                                     cqOffsets
}

// The kernel's sizes, checked at compile time.
var (
	_ [64]byte  = [unsafe.Sizeof(sqe{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(cqe{})]byte{}
	_ [120]byte = [unsafe.Sizeof(params{})]byte{}
)

// ring is one io_uring shared by the process, with the eventfd the kernel
// signals on each completion and one goroutine reaping them.
type ring struct {
	fd        int
	supported [256]bool // by opcode, from the kernel's probe

	sqHead, sqTail *uint32
	sqMask         uint32
	sqArray        unsafe.Pointer // uint32 per entry
	sqes           unsafe.Pointer // sqe per entry
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer // cqe per entry

	efd   *os.File // non-blocking eventfd, read through the runtime's poller
	slots chan struct{}

	mu      sync.Mutex // the submission ring, nextID, waiting
	nextID  uint64
	waiting map[uint64]chan int32 // request id → its result
}

var (
	ringOnce sync.Once
	shared   *ring
	ringErr  error
)

// sharedRing sets up the process's ring on first use; nil if the kernel
// refuses (every call is then the plain one).
func sharedRing() *ring {
	ringOnce.Do(func() { shared, ringErr = newRing() })
	return shared
}

func newRing() (*ring, error) {
	var p params
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, sqEntries, uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, os.NewSyscallError("io_uring_setup", e)
	}
	r := &ring{fd: int(fd), waiting: map[uint64]chan int32{}}
	ok := false
	defer func() {
		if !ok {
			unix.Close(r.fd) // also unmaps what the kernel mapped for it
		}
	}()
	if p.features&featSingleMmap == 0 {
		return nil, os.NewSyscallError("io_uring_setup", syscall.ENOTSUP)
	}
	if err := r.probe(); err != nil {
		return nil, err
	}
	size := max(p.sq.array+p.sqEntries*4, p.cq.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	mem, err := unix.Mmap(r.fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	sqeMem, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(mem)
		return nil, os.NewSyscallError("mmap", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }
	r.sqHead, r.sqTail = (*uint32)(at(p.sq.head)), (*uint32)(at(p.sq.tail))
	r.sqMask, r.sqArray = *(*uint32)(at(p.sq.mask)), at(p.sq.array)
	r.sqes = unsafe.Pointer(&sqeMem[0])
	r.cqHead, r.cqTail = (*uint32)(at(p.cq.head)), (*uint32)(at(p.cq.tail))
	r.cqMask, r.cqes = *(*uint32)(at(p.cq.mask)), at(p.cq.cqes)
	r.slots = make(chan struct{}, min(p.sqEntries, p.cqEntries))

	workers := [2]uint32{maxWorkers, maxWorkers}                        // bounded, unbounded
	_ = r.register(registerIOWQMaxWorkers, unsafe.Pointer(&workers), 2) // Linux 5.15; the kernel's own bound before

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	efd32 := int32(efd)
	if err := r.register(registerEventfd, unsafe.Pointer(&efd32), 1); err != nil {
		unix.Close(efd)
		return nil, err
	}
	r.efd = os.NewFile(uintptr(efd), "parkedfs-eventfd") // non-blocking: joins the poller
	ok = true
	go r.reap() // lives as long as the process, like the ring
	return r, nil
}

func (r *ring) register(op uintptr, arg unsafe.Pointer, n uintptr) error {
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), op, uintptr(arg), n, 0, 0); e != 0 {
		return os.NewSyscallError("io_uring_register", e)
	}
	return nil
}

// probe asks the kernel which operations it runs (Linux 5.6).
func (r *ring) probe() error {
	const ops = 256
	var buf [16 + ops*8]byte // struct io_uring_probe, then its ops
	if err := r.register(registerProbe, unsafe.Pointer(&buf[0]), ops); err != nil {
		return err
	}
	for i := range int(buf[1]) { // ops_len
		op := buf[16+i*8:]
		if *(*uint16)(unsafe.Pointer(&op[2]))&probeOpSupported != 0 {
			r.supported[op[0]] = true
		}
	}
	return nil
}

// unlink removes name, a directory if dir (AT_REMOVEDIR: rmdir).
func (r *ring) unlink(name string, dir bool) (int32, bool) {
	path, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, false // a NUL in the name: the plain call says so
	}
	var flags uint32
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	return r.call(sqe{opcode: opUnlinkat, fd: unix.AT_FDCWD, addr: uint64(uintptr(unsafe.Pointer(path))), opFlags: flags}, path, nil)
}

func (r *ring) rename(oldpath, newpath string) (int32, bool) {
	from, err := unix.BytePtrFromString(oldpath)
	if err != nil {
		return 0, false
	}
	to, err := unix.BytePtrFromString(newpath)
	if err != nil {
		return 0, false
	}
	atCWD := int32(unix.AT_FDCWD)
	return r.call(sqe{opcode: opRenameat, fd: atCWD, addr: uint64(uintptr(unsafe.Pointer(from))),
		off: uint64(uintptr(unsafe.Pointer(to))), len: uint32(atCWD)}, from, to)
}

func (r *ring) truncate(f *os.File, size int64) (int32, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var res int32
	var submitted bool
	// The descriptor is held only for the submission: the kernel takes its
	// own reference to the file then, so a Close meanwhile is harmless.
	err = rc.Control(func(fd uintptr) {
		res, submitted = r.call(sqe{opcode: opFtruncate, fd: int32(fd), off: uint64(size)}, nil, nil)
	})
	return res, err == nil && submitted
}

// call submits s and parks until the kernel completes it, returning its
// result (0 or -errno). submitted is false when the kernel lacks the
// operation or refused the submission, or cancelled the request before it
// ran (its submitting thread exited): nothing was done and the caller makes
// the plain call. The kernel copies the paths a and b point to while
// submitting; they stay pinned until the call is done all the same.
func (r *ring) call(s sqe, a, b *byte) (res int32, submitted bool) {
	if !r.supported[s.opcode] {
		return 0, false
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, p := range []*byte{a, b} {
		if p != nil {
			pin.Pin(p)
		}
	}
	r.slots <- struct{}{}
	defer func() { <-r.slots }()
	done := make(chan int32, 1)

	r.mu.Lock()
	r.nextID++
	s.userData = r.nextID
	r.waiting[s.userData] = done
	tail := atomic.LoadUint32(r.sqTail)
	i := tail & r.sqMask
	*(*sqe)(unsafe.Add(r.sqes, uintptr(i)*unsafe.Sizeof(sqe{}))) = s
	*(*uint32)(unsafe.Add(r.sqArray, uintptr(i)*4)) = i
	atomic.StoreUint32(r.sqTail, tail+1)
	var e syscall.Errno
	for {
		_, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if e != syscall.EINTR {
			break
		}
	}
	if atomic.LoadUint32(r.sqHead) == tail {
		// Not taken (the kernel reads the ring only inside io_uring_enter,
		// and every earlier entry was taken): withdraw it.
		atomic.StoreUint32(r.sqTail, tail)
		delete(r.waiting, s.userData)
		r.mu.Unlock()
		return 0, false
	}
	r.mu.Unlock()

	res = <-done
	if res == -int32(syscall.ECANCELED) {
		return 0, false
	}
	return res, true
}

// reap waits (parked in the poller) for the eventfd, then takes every
// completion off the ring and hands each result to its waiter.
func (r *ring) reap() {
	var count [8]byte
	for {
		if _, err := r.efd.Read(count[:]); err != nil {
			// Not expected of an eventfd; poll the ring instead of
			// stopping, so no call waits forever.
			time.Sleep(time.Millisecond)
		}
		head := atomic.LoadUint32(r.cqHead)
		tail := atomic.LoadUint32(r.cqTail)
		if head == tail {
			continue
		}
		r.mu.Lock()
		for ; head != tail; head++ {
			c := *(*cqe)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*unsafe.Sizeof(cqe{})))
			if done, ok := r.waiting[c.userData]; ok {
				delete(r.waiting, c.userData)
				done <- c.res
			}
		}
		r.mu.Unlock()
		atomic.StoreUint32(r.cqHead, head)
	}
}

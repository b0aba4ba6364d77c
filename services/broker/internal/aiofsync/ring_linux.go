//go:build linux

package aiofsync

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Linux AIO ABI (include/uapi/linux/aio_abi.h).
const (
	iocbCmdFsync  = 2 // IOCB_CMD_FSYNC
	iocbFlagResfd = 1 // IOCB_FLAG_RESFD: signal aio_resfd (an eventfd) on completion
)

// iocb is struct iocb, 64 bytes on every Linux architecture (aio_key and
// aio_rw_flags trade places on big-endian ones; both are 0 here).
type iocb struct {
	data     uint64
	key      uint32
	rwFlags  int32
	opcode   uint16
	reqprio  int16
	fildes   uint32
	buf      uint64
	nbytes   uint64
	offset   int64
	reserved uint64
	flags    uint32
	resfd    uint32
}

// ioEvent is struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64 // 0, or -errno of the fsync
	res2 int64
}

// maxInFlight bounds the requests submitted and not yet reaped: the
// kernel's completion ring holds that many. Further Syncs wait for a slot.
const maxInFlight = 128

// ring is one AIO context shared by the process, with the eventfd the
// kernel signals on each completion and one goroutine reaping them.
type ring struct {
	ctx   uintptr  // aio_context_t
	efd   *os.File // non-blocking eventfd, read through the runtime's poller
	efdFd uint32
	slots chan struct{}

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan int64 // request id → its result
}

var (
	ringOnce sync.Once
	shared   *ring
)

// sharedRing sets up the process's ring on first use; nil if the kernel
// refuses (every Sync is then a plain fsync).
func sharedRing() *ring {
	ringOnce.Do(func() { shared, _ = newRing() })
	return shared
}

func newRing() (*ring, error) {
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, maxInFlight, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return nil, e
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return nil, err
	}
	r := &ring{
		ctx:     ctx,
		efd:     os.NewFile(uintptr(fd), "aiofsync-eventfd"), // non-blocking: joins the poller
		efdFd:   uint32(fd),
		slots:   make(chan struct{}, maxInFlight),
		waiting: map[uint64]chan int64{},
	}
	go r.reap() // lives as long as the process, like the ring
	return r, nil
}

// sync submits an fsync of f and parks until the kernel completes it.
// submitted is false when the kernel refused the request (or f is closed):
// nothing was done and the caller falls back to a plain fsync.
func (r *ring) sync(f *os.File) (err error, submitted bool) {
	r.slots <- struct{}{}
	defer func() { <-r.slots }()
	done := make(chan int64, 1)
	r.mu.Lock()
	r.nextID++
	id := r.nextID
	r.waiting[id] = done
	r.mu.Unlock()

	var submitErr syscall.Errno
	rc, cerr := f.SyscallConn()
	if cerr == nil {
		// The descriptor is held only for the submission: the kernel takes
		// its own reference to the file, so a Close meanwhile is harmless.
		cerr = rc.Control(func(fd uintptr) {
			cb := &iocb{data: id, opcode: iocbCmdFsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: r.efdFd}
			var pin runtime.Pinner // the kernel reads cb through the array
			pin.Pin(cb)
			cbs := &[1]*iocb{cb}
			_, _, submitErr = unix.Syscall(unix.SYS_IO_SUBMIT, r.ctx, 1, uintptr(unsafe.Pointer(cbs)))
			pin.Unpin()
		})
	}
	if cerr != nil || submitErr != 0 {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
		return nil, false
	}
	if res := <-done; res < 0 {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.Errno(-res)}, true
	}
	return nil, true
}

// reap waits (parked in the poller) for the eventfd, then takes every
// completed event off the ring without blocking and hands each result to
// its waiter. An event taken early, before its eventfd signal was read,
// only makes a later pass find nothing.
func (r *ring) reap() {
	var count [8]byte
	events := make([]ioEvent, maxInFlight)
	for {
		if _, err := r.efd.Read(count[:]); err != nil {
			// Not expected of an eventfd; poll the ring instead of stopping,
			// so no Sync waits forever.
			time.Sleep(time.Millisecond)
		}
		for {
			var zero unix.Timespec
			n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, r.ctx, 0, uintptr(len(events)),
				uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(&zero)), 0)
			if e == unix.EINTR {
				continue
			}
			if e != 0 || n == 0 {
				break
			}
			r.mu.Lock()
			for _, ev := range events[:n] {
				if done, ok := r.waiting[ev.data]; ok {
					delete(r.waiting, ev.data)
					done <- ev.res
				}
			}
			r.mu.Unlock()
		}
	}
}

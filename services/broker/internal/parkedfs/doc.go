// Package parkedfs removes, renames and truncates files without holding the
// calling goroutine's P while the file system frees blocks.
//
// Freeing a file's blocks can wait for the device: on a file system mounted
// with discard, unlinking a 16 MiB segment trims it before the call returns
// (12-20 ms here; 100+ ms for 256 MiB), and a rename over an old checkpoint
// or a truncation of preallocated blocks does the same. A plain system call
// keeps its thread's P until the runtime's sysmon takes it back, 10-20 ms
// later in a busy process; with GOMAXPROCS 1, as a broker on a small machine
// runs, the whole broker stands still meanwhile (aiofsync says the same of
// fsync).
//
// On Linux, each call is submitted to an io_uring (IORING_OP_UNLINKAT,
// RENAMEAT: Linux 5.11+; FTRUNCATE: 6.9+). The kernel runs these on its
// io-wq worker threads and posts the completion, which signals an eventfd
// read through the runtime's network poller: the calling goroutine parks as
// one waiting on a socket does and its P runs the rest of the process. Where
// the kernel refuses (an older kernel, io_uring disabled by sysctl or by a
// container's seccomp profile, an operation it lacks), each call is the
// plain system call, with the same result and error.
package parkedfs

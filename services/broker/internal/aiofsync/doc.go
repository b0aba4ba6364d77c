// Package aiofsync flushes a file to stable storage without holding the
// calling goroutine's P.
//
// A plain fsync is a blocking system call: the goroutine's thread keeps its
// P until the runtime's sysmon notices and hands the P to another thread,
// which takes 20 µs to 10 ms (sysmon sleeps longer while the process is
// busy). With GOMAXPROCS 1, as a broker on a small machine runs, nothing
// else in the process runs meanwhile: a checkpoint's 150 ms fsync stopped
// a broker's produce, fetch and replication paths for 10-20 ms at a time.
//
// On Linux, Sync submits the fsync as an asynchronous request (io_submit
// with IOCB_CMD_FSYNC, Linux 4.18+): the kernel runs it on a worker thread
// and signals an eventfd when it is done. The eventfd is read through the
// runtime's network poller, so the calling goroutine parks like one waiting
// on a socket and its P runs the rest of the process. Where the kernel
// refuses the request (an older kernel, a file system without asynchronous
// fsync, a seccomp filter), Sync falls back to the plain fsync.
package aiofsync

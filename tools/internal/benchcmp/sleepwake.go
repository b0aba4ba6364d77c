package benchcmp

import (
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SleepWake is what one thread's sleep and wake-up costs on this machine,
// the price of every context switch in the CPU table: a synchronous write
// crosses four processes, and each hop puts a thread to sleep and wakes
// another. On bare metal a sleep of 1 µs costs about a microsecond of CPU
// and returns within tens of µs; a virtual machine may charge ten times
// that, and then the switches, not the brokers' work, bound the
// synchronous rows of both systems.
type SleepWake struct {
	// CPU is the thread's CPU time per sleep, Wall the time a sleep of
	// 1 µs took from call to return.
	CPU  time.Duration `json:"cpu_ns"`
	Wall time.Duration `json:"wall_ns"`
}

// measureSleepWake times n sleeps of 1 µs on one locked thread.
func measureSleepWake(n int) (SleepWake, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ts := syscall.Timespec{Nsec: 1000}
	cpu0, err := threadCPU()
	if err != nil {
		return SleepWake{}, err
	}
	start := time.Now()
	for range n {
		if err := syscall.Nanosleep(&ts, nil); err != nil && err != syscall.EINTR {
			return SleepWake{}, err
		}
	}
	wall := time.Since(start)
	cpu1, err := threadCPU()
	if err != nil {
		return SleepWake{}, err
	}
	return SleepWake{CPU: (cpu1 - cpu0) / time.Duration(n), Wall: wall / time.Duration(n)}, nil
}

// threadCPU is the calling thread's CPU time (user + system), from the
// scheduler's own count: getrusage(RUSAGE_THREAD) splits it by clock
// ticks and reported no time at all for 4 MiB written twice.
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

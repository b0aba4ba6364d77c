// Package sysmon keeps the Go runtime's monitor thread (sysmon) from deep
// sleep, by starting the process again with GODEBUG=schedtrace set.
//
// sysmon deep-sleeps whenever every P of the process is idle, and the next
// system call wakes it (entersyscall); it then polls every 20 µs for a
// millisecond or more before it backs off. A broker on a synchronous
// acks=all write idles between every pair of messages, so each write woke
// the sysmon of the leader and of both followers again: measured on the dev
// cluster, 9 of the brokers' 14.5 context switches per write, at 17-19 µs
// of CPU each on a virtual machine. With schedtrace set the runtime never
// lets sysmon deep-sleep (it must print on time); with nothing to do it
// backs off to one wake-up every 10 ms, about 2 ms of CPU a second. The
// interval chosen, the largest the runtime takes (2^31-1 ms, 24.8 days),
// prints a line to stderr only once per interval of the host's monotonic
// clock: at start on a host up for longer than that, then every 24.8 days.
//
// GODEBUG is read once, when the runtime starts, so the setting takes a new
// process image: Reexec replaces the process with itself (same PID, same
// arguments and open files). A schedtrace the environment already has is
// left as it is: GODEBUG=schedtrace=0 turns the behaviour off.
package sysmon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Setting is the GODEBUG entry that keeps sysmon polling.
const Setting = "schedtrace=2147483647"

// Env returns environ with Setting added to GODEBUG, and whether it had to
// be added: false when GODEBUG already names schedtrace, whatever its value.
func Env(environ []string) ([]string, bool) {
	out := make([]string, 0, len(environ)+1)
	found := false
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			out = append(out, kv)
			continue
		}
		if found {
			continue // the runtime, like getenv, reads the first GODEBUG
		}
		found = true
		if hasSchedtrace(v) {
			return environ, false
		}
		if v != "" {
			v += ","
		}
		out = append(out, "GODEBUG="+v+Setting)
	}
	if !found {
		out = append(out, "GODEBUG="+Setting)
	}
	return out, true
}

func hasSchedtrace(godebug string) bool {
	for f := range strings.SplitSeq(godebug, ",") {
		if k, _, _ := strings.Cut(f, "="); strings.TrimSpace(k) == "schedtrace" {
			return true
		}
	}
	return false
}

// Polls reports whether a runtime started with this GODEBUG keeps sysmon
// polling: its last schedtrace is positive.
func Polls(godebug string) bool {
	n := 0
	for f := range strings.SplitSeq(godebug, ",") {
		if k, v, _ := strings.Cut(f, "="); strings.TrimSpace(k) == "schedtrace" {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return n > 0
}

// Active reports whether this process's runtime keeps sysmon polling.
func Active() bool { return Polls(os.Getenv("GODEBUG")) }

// Reexec replaces the process with its own executable, same arguments, and
// env. It returns only on failure (the executable is gone, say); the caller
// then goes on without the setting.
func Reexec(env []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sysmon: find the executable to start again: %w", err)
	}
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("sysmon: start %s again with GODEBUG=%s: %w", exe, Setting, err)
	}
	return nil // not reached
}

package benchcmp

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// haltPollPath is where a Linux guest with the haltpoll cpuidle driver
// says how long an idle vCPU polls for work before it halts. A halted
// vCPU is run again by the hypervisor when another vCPU wakes a process on
// it, and that wait lands in every hop of a synchronous write between
// processes on different vCPUs; Linux's default is 200 µs of polling.
var haltPollPath = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"

// linuxHaltPollDefault is haltpoll's own default, in ns.
const linuxHaltPollDefault = 200000

// readHaltPoll reads the guest's halt-poll time; ok is false when the
// machine has no such setting (bare metal, another idle driver).
func readHaltPoll(path string) (ns int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// haltPollNote says what an idle vCPU of the run's machine did, beside the
// floor and the one-CPU pass that both depend on it.
func (r *Result) haltPollNote() string {
	if r.HaltPollNs == nil {
		return ""
	}
	ns := *r.HaltPollNs
	if ns == 0 {
		return fmt.Sprintf("\n- This machine is a virtual machine whose idle vCPU halts at once (`guest_halt_poll_ns` 0; Linux polls %d µs first by default), so a message to a process asleep on the other vCPU waits for the hypervisor to run that vCPU again. Both systems pay it on every hop between processes; the figures change with that setting (see the README's \"What the targets came to\").\n", linuxHaltPollDefault/1000)
	}
	return fmt.Sprintf("\n- This machine is a virtual machine whose idle vCPU polls for work %d µs before it halts (`guest_halt_poll_ns` %d; Linux's default is %d µs), so a message to a process on the other vCPU within that time does not wait for the hypervisor.\n", ns/1000, ns, linuxHaltPollDefault/1000)
}

// idleVCPUClause says, for the one-CPU pass's note, what waking a process
// on the other, idle vCPU cost in this run.
func (r *Result) idleVCPUClause() string {
	switch {
	case r.HaltPollNs == nil:
		return "and a process woken on an idle CPU waits for that CPU to leave its idle state"
	case *r.HaltPollNs == 0:
		return "and an idle vCPU of this VM halts at once, so each such hop waits for the hypervisor to run it again"
	}
	return fmt.Sprintf("and a vCPU of this VM idle for longer than its halt polling (%d µs) has halted, so such a hop waits for the hypervisor to run it again", *r.HaltPollNs/1000)
}

package devcluster

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// ephemeralRangeFile holds the kernel's range of ports for outgoing
// connections (a seam for tests).
var ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// EphemeralOverlap says, when some of the cluster's ports fall inside the
// kernel's ephemeral port range, that a node may fail with "address already
// in use" (an outgoing connection, the cluster's own included, can take
// its port before it binds), and which --port-base avoids it; "" when none
// does or the range cannot be read. The documented ports lie below Linux's
// default range (32768-60999), so this concerns a --port-base only.
func EphemeralOverlap(o Options) string {
	lo, hi, ok := ephemeralRange()
	if !ok {
		return ""
	}
	first, last, n := 0, 0, 0
	for _, a := range o.withPorts().Ports().all() {
		_, ps, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		p, err := strconv.Atoi(ps)
		if err != nil || p < lo || p > hi {
			continue
		}
		if n == 0 || p < first {
			first = p
		}
		if p > last {
			last = p
		}
		n++
	}
	if n == 0 {
		return ""
	}
	advice := "use the documented ports (no --port-base)"
	if o.PortBase > 0 {
		advice = fmt.Sprintf("choose a --port-base from 1024 to %d or above %d", lo-o.Span(), hi)
		if lo-o.Span() < 1024 {
			advice = fmt.Sprintf("choose a --port-base above %d", hi)
		}
	}
	return fmt.Sprintf("the cluster's ports (%d-%d) lie in the kernel's ephemeral port range %d-%d (%s), where an outgoing connection can take a node's port before the node listens on it (\"address already in use\"); %s",
		first, last, lo, hi, ephemeralRangeFile, advice)
}

func ephemeralRange() (lo, hi int, ok bool) {
	b, err := os.ReadFile(ephemeralRangeFile)
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

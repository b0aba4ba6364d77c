// Package loopback finds free loopback ports for clusters that tests and
// tools start on this machine.
//
// Ports are taken below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default). A port
// picked by listening on :0 comes from that range, and once released it may
// become the local port of any outbound connection on the machine; a node
// restarted on "its" port then fails with "address already in use" for as
// long as that connection lives. Ports below the range are never handed out
// to outbound connections, so a stopped node can always bind its port again
// unless another cluster took it.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the first port handed out: above the well-known and most
// registered service ports a developer machine runs (9092, 2379, 8080, ...).
const lowest = 10000

// ephemeralStart is the first port of the kernel's ephemeral range, or
// 32768 when it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > lowest+1000 {
				return v
			}
		}
	}
	return 32768
}

// FreeRange returns the first of span consecutive loopback ports that were
// all free when probed, below the ephemeral range. rng picks where to look,
// so processes running side by side rarely probe the same ports.
func FreeRange(rng *rand.Rand, span int) (int, error) {
	if span < 1 {
		return 0, fmt.Errorf("span %d: want at least one port", span)
	}
	blocks := (ephemeralStart() - lowest) / span
	if blocks < 1 {
		return 0, fmt.Errorf("no room for %d ports between %d and the ephemeral range", span, lowest)
	}
	for range 64 {
		base := lowest + rng.IntN(blocks)*span
		if rangeFree(base, span) {
			return base, nil
		}
	}
	return 0, errors.New("no free range of loopback ports below the ephemeral range")
}

// Listen binds a free 127.0.0.1 port below the ephemeral range and returns
// the listener, still open: a server started on it has its port from the
// start, with no window between a probe and the bind in which another
// process could take it (which FreeAddr leaves). A node restarted on the
// same address binds it again itself.
func Listen() (net.Listener, error) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	start := ephemeralStart()
	var err error
	for range 64 {
		var l net.Listener
		port := lowest + rng.IntN(start-lowest)
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no free loopback port below the ephemeral range: %w", err)
}

// FreeAddr returns a free 127.0.0.1 address below the ephemeral range.
func FreeAddr() (string, error) {
	base, err := FreeRange(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), 1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(base)), nil
}

func rangeFree(base, span int) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for p := base; p < base+span; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		held = append(held, l)
	}
	return true
}

package gateway

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setPeerTimeout sets TCP_USER_TIMEOUT: the longest data may stay
// unacknowledged (retransmissions, zero-window probes, keepalive probes
// unanswered) before the connection is aborted.
func setPeerTimeout(c *net.TCPConn, d time.Duration) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

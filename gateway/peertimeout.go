package gateway

import (
	"net"
	"time"
)

// peerTimeoutListener bounds how long an accepted connection may leave
// what the gateway sent unacknowledged (TCP_USER_TIMEOUT, on Linux) before
// the kernel ends it. A caller whose network vanished (no FIN, no ACK: a
// suspended laptop, a dropped route) otherwise held its console event
// stream or records:follow until the kernel gave up retransmitting, about
// 15 minutes: a quiet stream writes a few bytes per heartbeat, far below
// the send buffer, so no write ever blocks long enough for its deadline.
// The same bound ends a peer that keeps acknowledging but has stopped
// reading (its receive window stays closed). The kernel's error ends the
// request's context, which gives the stream's slot back.
type peerTimeoutListener struct {
	net.Listener
	timeout time.Duration
	// warn is told, once, when the platform refuses the option.
	warn func(error)
}

func (l *peerTimeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.timeout <= 0 {
		return c, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := setPeerTimeout(tc, l.timeout); err != nil && l.warn != nil {
			l.warn(err)
			l.warn = nil
		}
	}
	return c, nil
}

//go:build !linux

package gateway

import (
	"errors"
	"net"
	"time"
)

// setPeerTimeout: TCP_USER_TIMEOUT is Linux's; elsewhere a vanished peer
// is found by TCP keepalive and the retransmission timeout alone.
func setPeerTimeout(*net.TCPConn, time.Duration) error {
	return errors.New("--http.peer.timeout.ms needs TCP_USER_TIMEOUT (Linux); vanished callers are found by TCP keepalive only")
}

package links

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcIdentifier names the process on the other end of a loopback
// connection through /proc (Linux, same user, no root): the connection's
// client socket is found in /proc/net/tcp{,6} by its two ports, and its
// inode among the file descriptors of the candidate processes. pids lists
// the candidates, pid → name, at the time of the call (a restarted node has
// a new pid). "" when the owner is none of them or /proc is unavailable.
func ProcIdentifier(pids func() map[int]string) func(net.Conn) string {
	return func(c net.Conn) string {
		remote, ok1 := c.RemoteAddr().(*net.TCPAddr)
		local, ok2 := c.LocalAddr().(*net.TCPAddr)
		if !ok1 || !ok2 {
			return ""
		}
		inode := socketInode(remote.Port, local.Port)
		if inode == "" {
			return ""
		}
		want := "socket:[" + inode + "]"
		for pid, name := range pids() {
			dir := fmt.Sprintf("/proc/%d/fd", pid)
			ents, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
					return name
				}
			}
		}
		return ""
	}
}

// socketInode finds the inode of the socket whose local port is
// localPort and remote port remotePort.
func socketInode(localPort, remotePort int) string {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[0] == "sl" {
				continue
			}
			if hexPort(fs[1]) == localPort && hexPort(fs[2]) == remotePort {
				fh.Close()
				return fs[9]
			}
		}
		fh.Close()
	}
	return ""
}

func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	v, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(v)
}

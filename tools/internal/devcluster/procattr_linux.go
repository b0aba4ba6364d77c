package devcluster

import "syscall"

// procAttr gives a node its own process group (a terminal's Ctrl-C reaches
// only the launcher, which stops everything in order) and asks the kernel
// to kill it if the launcher dies without stopping it (a test binary
// killed on timeout, a launcher killed -9), so no node outlives its
// launcher holding ports and data.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

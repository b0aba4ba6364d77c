//go:build !linux

package devcluster

import "syscall"

// procAttr gives a node its own process group, so a terminal's Ctrl-C
// reaches only the launcher, which stops everything in order.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

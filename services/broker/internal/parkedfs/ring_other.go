//go:build !linux

package parkedfs

import "os"

// ring is absent where there is no io_uring: every call is the plain one.
type ring struct{}

var ringErr error

func sharedRing() *ring { return nil }

func (*ring) unlink(string, bool) (int32, bool)      { return 0, false }
func (*ring) rename(string, string) (int32, bool)    { return 0, false }
func (*ring) truncate(*os.File, int64) (int32, bool) { return 0, false }

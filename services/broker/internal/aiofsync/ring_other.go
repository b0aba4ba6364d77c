//go:build !linux

package aiofsync

import "os"

// ring is absent where there is no Linux AIO: every Sync is a plain fsync.
type ring struct{}

func sharedRing() *ring { return nil }

func (*ring) sync(*os.File) (error, bool) { return nil, false }

package aiofsync

import (
	"os"
	"sync/atomic"
)

// Sync flushes f's data and metadata to stable storage, as f.Sync does,
// with the calling goroutine parked (not in a system call) while the
// device works.
func Sync(f *os.File) error {
	if r := sharedRing(); r != nil {
		if err, submitted := r.sync(f); submitted {
			parked.Add(1)
			return err
		}
	}
	fallbacks.Add(1)
	return f.Sync()
}

// SyncDir makes a directory's entries durable (creations, renames and
// removals in it), as an fsync of the directory does.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := Sync(d); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

var parked, fallbacks atomic.Int64

// Counts says how many Syncs ran asynchronously (the caller parked) and how
// many fell back to a plain fsync, since the process started.
func Counts() (asynchronous, plain int64) { return parked.Load(), fallbacks.Load() }

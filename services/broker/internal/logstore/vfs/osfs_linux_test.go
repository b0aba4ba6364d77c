//go:build linux

package vfs

import (
	"errors"
	"path/filepath"
	"testing"

	"tidemark.io/services/broker/internal/parkedfs"
)

// The OS file system's removals, renames and truncations, each of which may
// free blocks, run parked on io_uring: one parked call each, none plain.
func TestOSFreesBlocksParked(t *testing.T) {
	if ok, err := parkedfs.Available(); !ok {
		t.Fatalf("the kernel refused io_uring: %v", err)
	}
	dir := t.TempDir()
	steps := []struct {
		name string
		do   func() error
	}{
		{"Create", func() error {
			f, err := OS.Create(filepath.Join(dir, "seg"))
			if err != nil {
				return err
			}
			_, err = f.WriteAt([]byte("tidemark"), 0)
			return errors.Join(err, f.Close())
		}},
		{"Truncate", func() error {
			f, err := OS.Open(filepath.Join(dir, "seg"))
			if err != nil {
				return err
			}
			return errors.Join(f.Truncate(3), f.Close())
		}},
		{"Rename", func() error { return OS.Rename(filepath.Join(dir, "seg"), filepath.Join(dir, "seg.deleted")) }},
		{"Remove", func() error { return OS.Remove(filepath.Join(dir, "seg.deleted")) }},
		{"MkdirAll", func() error { return OS.MkdirAll(filepath.Join(dir, "p-0", "x")) }},
		{"RemoveAll", func() error { return OS.RemoveAll(filepath.Join(dir, "p-0")) }},
	}
	for _, s := range steps {
		parked0, plain0 := parkedfs.Counts()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		parked, plain := parkedfs.Counts()
		switch {
		case plain != plain0:
			t.Fatalf("%s made %d plain calls", s.name, plain-plain0)
		case s.name == "Create" || s.name == "MkdirAll":
			if parked != parked0 {
				t.Fatalf("%s made %d parked calls, want none", s.name, parked-parked0)
			}
		case parked == parked0:
			t.Fatalf("%s made no parked call", s.name)
		}
	}
	if entries, err := OS.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("left in %s: %v (%v)", dir, entries, err)
	}
}

package devcluster

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/loopback"
)

// upOptions are a small plaintext cluster of fake binaries (they exit at
// once) on its own ports.
func upOptions(t *testing.T, dataDir string, portBase int) Options {
	t.Helper()
	o := DefaultOptions()
	o.DataDir, o.BinDir, o.PortBase = dataDir, fakeBinDir(t), portBase
	o.Brokers, o.Controllers = 1, 1
	o.Plaintext, o.PlaintextEtcd = true, true
	return o
}

// twoPortBases finds two free port ranges side by side.
func twoPortBases(t *testing.T) (int, int) {
	t.Helper()
	base, err := loopback.FreeRange(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)), 2*PortSpan)
	if err != nil {
		t.Fatal(err)
	}
	return base, base + PortSpan
}

// A second launcher on a data dir a running one holds (another
// --port-base, the --data-dir forgotten) refuses at once, naming the data
// dir and the other launcher's pid. It used to hang for good in embedded
// etcd, whose database the first launcher's etcd holds flocked, deaf to
// Ctrl-C. Once the first is down the data dir is free again.
func TestSecondLauncherOnTheSameDataDirRefusesAtOnce(t *testing.T) {
	dir := t.TempDir()
	baseA, baseB := twoPortBases(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := Up(ctx, upOptions(t, dir, baseA), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Down(&bytes.Buffer{}) })

	type result struct {
		c   *Cluster
		err error
	}
	second := make(chan result, 1)
	go func() {
		c, err := Up(ctx, upOptions(t, dir, baseB), &bytes.Buffer{})
		second <- result{c, err}
	}()
	var r result
	select {
	case r = <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("a second launcher on the same data dir is still starting after 30 s (it hangs on etcd's database lock)")
	}
	if r.c != nil {
		r.c.Down(&bytes.Buffer{})
	}
	if !errors.Is(r.err, ErrDataDirInUse) || !strings.Contains(r.err.Error(), dir) ||
		!strings.Contains(r.err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second launcher on %s: %v, want refused as in use, naming the data dir and pid %d", dir, r.err, os.Getpid())
	}

	a.Down(&bytes.Buffer{})
	f, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("after the first launcher's Down: %v, want the data dir free", err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(dir, LockFile)); err != nil {
		t.Errorf("the lock file: %v", err)
	}
}

// A node that exits during the start shows the end of its log with the
// warning, where its reason is.
func TestUpShowsTheLogOfANodeThatExitedDuringStart(t *testing.T) {
	base, _ := twoPortBases(t)
	o := upOptions(t, t.TempDir(), base)
	// An earlier run's output stays in the log and is not shown.
	if err := os.MkdirAll(filepath.Join(o.DataDir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.DataDir, "logs", "broker-1.log"), []byte("==== broker-1 started by tidemark dev at then ====\nearlier run's line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.BinDir, "broker"), []byte("#!/bin/sh\necho 'fatal: unknown flag --bogus' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	c, err := Up(ctx, o, &out)
	if err != nil {
		t.Fatal(err)
	}
	c.Down(&bytes.Buffer{})
	if !strings.Contains(out.String(), "warning: broker-1: exited during start") ||
		!strings.Contains(out.String(), "broker-1| fatal: unknown flag --bogus") {
		t.Errorf("Up's output does not show broker-1's log with its warning:\n%s", out.String())
	}
	if strings.Contains(out.String(), "earlier run's line") {
		t.Errorf("Up's output shows an earlier run's log:\n%s", out.String())
	}
}

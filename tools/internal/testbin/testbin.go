// Package testbin gives tests that launch a dev cluster of real processes
// the broker, controller, gateway and tidemark (CLI) binaries built from
// this checkout.
package testbin

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

var names = []string{"broker", "controller", "gateway", "tidemark"}

// Dir returns a directory holding broker, controller, gateway and tidemark: env's
// directory when that variable is set, else the checkout's bin/ when every
// binary there is newer than every Go source, go.mod and go.sum of the
// modules they are built from, else a fresh go build into a temporary dir,
// so a stale bin/ is never what is tested. root is the checkout (the
// directory of go.work). A build that fails fails the test under CI and
// skips it, saying why, otherwise (testenv).
func Dir(t *testing.T, root, env string) string {
	t.Helper()
	if dir := os.Getenv(env); dir != "" {
		for _, b := range names {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				t.Fatalf("%s=%s: %v (run make build)", env, dir, err)
			}
		}
		return dir
	}
	root, err := filepath.Abs(root)
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "go.work"))
	}
	if err == nil {
		fresh, why := fresh(root)
		if fresh {
			t.Logf("using %s", filepath.Join(root, "bin"))
			return filepath.Join(root, "bin")
		}
		t.Logf("building the binaries: %s", why)
		dir := t.TempDir()
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
			"tidemark.io/services/broker/cmd/broker", "tidemark.io/services/controller/cmd/controller", "tidemark.io/gateway/cmd/gateway",
			"tidemark.io/tools/cmd/tidemark")
		cmd.Dir = root
		out, berr := cmd.CombinedOutput()
		if berr == nil {
			return dir
		}
		err = &buildError{err: berr, out: strings.TrimSpace(string(out))}
	}
	testenv.Unavailable(t, "the broker, controller, gateway and tidemark binaries", "building them from the go.work workspace failed: "+err.Error())
	return ""
}

// fresh reports whether root/bin holds the binaries built after the last
// change to their sources.
func fresh(root string) (bool, string) {
	oldest := time.Time{}
	for _, b := range names {
		fi, err := os.Stat(filepath.Join(root, "bin", b))
		if err != nil {
			return false, "bin/" + b + " is absent"
		}
		if oldest.IsZero() || fi.ModTime().Before(oldest) {
			oldest = fi.ModTime()
		}
	}
	newer := ""
	for _, m := range []string{"services", "gateway", "proto", "tools"} {
		_ = filepath.WalkDir(filepath.Join(root, m), func(path string, d fs.DirEntry, err error) error {
			if err != nil || newer != "" {
				return filepath.SkipAll
			}
			name := d.Name()
			// Tests are not in the binaries.
			if d.IsDir() || strings.HasSuffix(name, "_test.go") || !(strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum") {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.ModTime().After(oldest) {
				newer = path
			}
			return nil
		})
	}
	if newer != "" {
		return false, "bin/ is older than " + newer
	}
	return true, ""
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	if e.out == "" {
		return e.err.Error()
	}
	return e.err.Error() + ": " + e.out
}

// Package testenv is how tidemark's tests step aside, in every module:
// a test that needs a tool this machine lacks (Jaeger, a browser,
// grpcurl, the workspace) fails under CI, where `make test` or .ci/run
// has provided every tool, and is skipped elsewhere; a test skipped by
// design (-short, an opt-in tier, a benchmark gated on a variable) says
// so the same way. Every skip message starts with Marker, which `make
// test`'s report (tools/cmd/testreport) lists at the end of each run, so
// nothing is skipped without the run saying so.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Marker starts every skip message this package writes.
const Marker = "SKIPPED:"

// InCI reports whether the CI variable is set (CI=true in .ci/run and on
// CI services): a missing tool is then a failure, not a skip. "false" and
// "0" count as unset.
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// Unavailable stops the test because what it needs is not there: under
// CI a failure naming what is missing and how to get it, otherwise a
// skip through Marker saying the same. It does not return.
func Unavailable(t testing.TB, what, install string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is missing and CI is set, so this test cannot be skipped: %s", what, install)
	}
	t.Skipf("%s needs %s, which is missing: %s (CI=true makes this a failure)", Marker, what, install)
}

// RequireFile returns path when it exists, else stops the test as
// Unavailable(what, install).
func RequireFile(t testing.TB, path, what, install string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Unavailable(t, what+" ("+path+")", install)
	}
	return path
}

// RequireCommand returns the first of names found on PATH, else stops
// the test as Unavailable(what, install).
func RequireCommand(t testing.TB, what, install string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Unavailable(t, fmt.Sprintf("%s (looked for %v on PATH)", what, names), install)
	return ""
}

// Skip skips a test by design (-short, an opt-in tier, a gated
// benchmark), through Marker so the run's report lists it.
func Skip(t testing.TB, why string) {
	t.Helper()
	t.Skip(Marker + " " + why)
}

// Skipf is Skip with a format.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Skip(Marker + " " + fmt.Sprintf(format, args...))
}

// SkipIfShort skips the test in -short mode (make test-unit), saying why.
func SkipIfShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		Skip(t, "-short: "+why)
	}
}

// FindJaeger is the Jaeger binary `make thirdparty` builds into .bin/ (the
// first found walking up from the test's directory), or TIDEMARK_JAEGER_BIN
// when set; "" when there is none.
func FindJaeger() string {
	if p := os.Getenv("TIDEMARK_JAEGER_BIN"); p != "" {
		return p
	}
	dir, _ := os.Getwd()
	for ; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, ".bin", "jaeger")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

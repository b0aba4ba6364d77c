package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a module whose tests pass, fail (with output), skip with and
// without the marker, fail in a subtest, and one package that does not
// build: go test -json on it is what the report reads in make test.
var fixture = map[string]string{
	"go.mod": "module fixture\n\ngo 1.26\n",
	"a/a_test.go": `package a

import "testing"

func TestGood(t *testing.T) { t.Log("hidden when it passes") }

func TestBad(t *testing.T) {
	t.Log("the first line of the failure")
	t.Error("the failure itself")
}

func TestMarked(t *testing.T) { t.Skip("SKIPPED: needs a tool: install it") }

func TestUnmarked(t *testing.T) { t.Skip("plain skip") }

func TestParent(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("broken", func(t *testing.T) { t.Fatal("subtest failure") })
}
`,
	"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestFine(t *testing.T) {}\n",
	"c/c_test.go": "package c\n\nimport \"testing\"\n\nfunc TestNoBuild(t *testing.T) { undefined() }\n",
	"d/d.go":      "package d\n",
}

func goTestJSON(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, body := range fixture {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go test on the fixture passed; it must fail:\n%s", out)
	}
	return out
}

func TestReportKeepsGoTestsLinesAndListsSkips(t *testing.T) {
	in := goTestJSON(t)
	var buf bytes.Buffer
	r := newReport(&buf, false)
	if err := r.read(bytes.NewReader(append([]byte("== go test (fixture)\n"), in...))); err != nil {
		t.Fatal(err)
	}
	r.summary()
	got := buf.String()
	for _, want := range []string{
		"== go test (fixture)\n",           // non-JSON lines pass through
		"ok  \tfixture/b\t",                // a passing package: its ok line
		"?   \tfixture/d\t[no test files]", // as go test prints it
		"--- FAIL: TestBad",                // a failing test's whole output
		"the first line of the failure",    //
		"the failure itself",               //
		"subtest failure",                  //
		"FAIL\tfixture/a\t",                // the package's FAIL line
		"FAIL\tfixture/c [build failed]",   // a package that does not build
		"undefined: undefined",             // and why
		"== 3 passed, 3 failed, 2 skipped", // TestGood, TestParent/ok, TestFine
		"  fixture/a TestBad\n",            // failed list
		"  fixture/a TestParent/broken\n",  //
		"  fixture/a TestMarked: needs a tool: install it\n",
		"  fixture/a TestUnmarked: plain skip [skipped without testenv's SKIPPED: marker]\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	for _, hidden := range []string{"hidden when it passes", "--- PASS", "=== RUN   TestGood"} {
		if strings.Contains(got, hidden) {
			t.Errorf("report shows %q, which plain go test hides:\n%s", hidden, got)
		}
	}
	if !r.failed() {
		t.Error("a failed run must make the report fail")
	}
}

func TestReportOfAPassingRunPasses(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Output":"PASS\n"}`,
		`{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}`,
		`{"Action":"pass","Package":"p"}`,
	}, "\n")
	var buf bytes.Buffer
	r := newReport(&buf, false)
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	r.summary()
	if r.failed() {
		t.Fatalf("a passing run failed:\n%s", buf.String())
	}
	if got := buf.String(); got != "ok  \tp\t0.01s\n\n== 1 passed, 0 failed, 0 skipped (1 packages tested, 0 without tests)\n" {
		t.Fatalf("report:\n%q", got)
	}
}

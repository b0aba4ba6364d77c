package rulesdoc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the directory holding go.work, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = up
	}
}

// TestProtocolRulesPageMatchesTheCode is the real check.
func TestProtocolRulesPageMatchesTheCode(t *testing.T) {
	root := repoRoot(t)
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	cited, err := CitedRules(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cited) < 20 {
		t.Fatalf("found only %d cited rules; the scan is not reading the code", len(cited))
	}
}

func write(t *testing.T, root, rel, body string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckNamesEachDisagreement builds a tiny repository with one of each
// mistake and expects exactly those, each naming what is wrong.
func TestCheckNamesEachDisagreement(t *testing.T) {
	root := t.TempDir()
	write(t, root, "services/a/a.go", "package a\n\n// keep applies F1 and F2.\nvar keep = \"F9 in a string is not a citation\"\n")
	write(t, root, "services/a/a_test.go", "package a\n\nimport \"testing\"\n\nfunc TestReal(t *testing.T) {\n\tt.Run(\"case-one\", func(t *testing.T) {})\n}\n")
	write(t, root, "services/a/testdata/script.txt", "")
	write(t, root, DocPath, strings.Join([]string{
		"# rules",
		"## F1 — first",
		"- Code: `services/a/a.go`",
		"- Tests: `services/a: TestReal`, `services/a: TestReal/case-one`, `services/a: TestReal/script`",
		"## F3 — third",
		"- Code: `services/a/gone.go`",
		"- Tests: `services/a: TestMissing`, `services/a: TestReal/nope`",
		"## F4 — fourth",
		"",
	}, "\n"))

	got, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"F2 is cited at services/a/a.go:3 but docs/protocol-rules.md has no section for it",
		"docs/protocol-rules.md:5: F3 names file services/a/gone.go, which does not exist",
		"docs/protocol-rules.md:5: F3 names test services/a: TestMissing: no func TestMissing(*testing.T) in services/a",
		`docs/protocol-rules.md:5: F3 names test services/a: TestReal/nope: no subtest "nope" (neither testdata/nope.txt nor a quoted name) in services/a`,
		"docs/protocol-rules.md:8: F4 names no file implementing it",
		"docs/protocol-rules.md:8: F4 names no test",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseDocRefusesTwoSectionsForOneRule(t *testing.T) {
	_, err := ParseDoc("## F5 — one\n## F5 — again\n")
	if err == nil || err.Error() != "docs/protocol-rules.md:2: a second section for F5" {
		t.Fatalf("err = %v", err)
	}
}

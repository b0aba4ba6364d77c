// Package rulesdoc checks docs/protocol-rules.md against the code: every
// replication rule a Go comment cites by number has a section, and every
// test and file a section names exists. The check runs as this package's
// test, so `make test` fails the day the page and the code drift apart.
package rulesdoc

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// DocPath is the page, relative to the repository root.
const DocPath = "docs/protocol-rules.md"

// SourceDirs are the top-level directories whose Go files may cite rules.
var SourceDirs = []string{"services", "gateway", "tools", "proto"}

var (
	citeRe    = regexp.MustCompile(`\bF([0-9]+)\b`)
	headingRe = regexp.MustCompile(`^## F([0-9]+) — \S`)
	testRe    = regexp.MustCompile("`([A-Za-z0-9_./-]+): (Test[A-Za-z0-9_]+)(?:/([A-Za-z0-9_-]+))?`")
	fileRe    = regexp.MustCompile("`((?:services|gateway|tools|proto)/[A-Za-z0-9_./-]+)`")
)

// Section is one rule's part of the page.
type Section struct {
	Rule  int
	Line  int
	Tests []TestRef
	Files []string
}

// TestRef names a test by its package directory, e.g.
// services/broker/internal/partition: TestScripts/epochs.
type TestRef struct {
	Dir, Name, Sub string
}

func (t TestRef) String() string {
	if t.Sub != "" {
		return fmt.Sprintf("%s: %s/%s", t.Dir, t.Name, t.Sub)
	}
	return fmt.Sprintf("%s: %s", t.Dir, t.Name)
}

// ParseDoc splits the page into rule sections and collects the tests and
// files each one names.
func ParseDoc(doc string) (map[int]*Section, error) {
	sections := map[int]*Section{}
	var cur *Section
	for i, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "## ") {
			cur = nil
			m := headingRe.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			if _, dup := sections[n]; dup {
				return nil, fmt.Errorf("%s:%d: a second section for F%d", DocPath, i+1, n)
			}
			cur = &Section{Rule: n, Line: i + 1}
			sections[n] = cur
			continue
		}
		if cur == nil {
			continue
		}
		for _, m := range testRe.FindAllStringSubmatch(line, -1) {
			cur.Tests = append(cur.Tests, TestRef{Dir: m[1], Name: m[2], Sub: m[3]})
		}
		for _, m := range fileRe.FindAllStringSubmatch(line, -1) {
			if !strings.Contains(m[0], ": ") {
				cur.Files = append(cur.Files, m[1])
			}
		}
	}
	return sections, nil
}

// CitedRules returns, for every rule number cited in a comment of a Go file
// under root's source directories, the first place citing it.
func CitedRules(root string) (map[int]string, error) {
	cited := map[int]string{}
	for _, top := range SourceDirs {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); n == "node_modules" || n == "testdata" || strings.HasPrefix(n, ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			return citesIn(root, path, cited)
		})
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	return cited, nil
}

func citesIn(root, path string, cited map[int]string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(root, path)
	fset := token.NewFileSet()
	file := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	var bad error
	s.Init(file, src, func(pos token.Position, msg string) { bad = fmt.Errorf("%s: %s", pos, msg) }, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		line := fset.Position(pos).Line
		for i, text := range strings.Split(lit, "\n") {
			for _, m := range citeRe.FindAllStringSubmatch(text, -1) {
				r, _ := strconv.Atoi(m[1])
				if _, seen := cited[r]; !seen {
					cited[r] = fmt.Sprintf("%s:%d", filepath.ToSlash(rel), line+i)
				}
			}
		}
	}
	return bad
}

// Check returns every disagreement between the page and the repository at
// root, in a stable order; none means the page is true.
func Check(root string) ([]string, error) {
	doc, err := os.ReadFile(filepath.Join(root, DocPath))
	if err != nil {
		return nil, err
	}
	sections, err := ParseDoc(string(doc))
	if err != nil {
		return nil, err
	}
	cited, err := CitedRules(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for r, where := range cited {
		if sections[r] == nil {
			problems = append(problems, fmt.Sprintf("F%d is cited at %s but %s has no section for it", r, where, DocPath))
		}
	}
	for r, s := range sections {
		if len(s.Tests) == 0 {
			problems = append(problems, fmt.Sprintf("%s:%d: F%d names no test", DocPath, s.Line, r))
		}
		if len(s.Files) == 0 {
			problems = append(problems, fmt.Sprintf("%s:%d: F%d names no file implementing it", DocPath, s.Line, r))
		}
		for _, t := range s.Tests {
			if err := testExists(root, t); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: F%d names test %s: %v", DocPath, s.Line, r, t, err))
			}
		}
		for _, f := range s.Files {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: F%d names file %s, which does not exist", DocPath, s.Line, r, f))
			}
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// testExists finds func Name(t *testing.T) in the directory's _test.go
// files; a subtest must be a script testdata/Sub.txt or a quoted name there.
func testExists(root string, t TestRef) error {
	dir := filepath.Join(root, t.Dir)
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no test files in %s", t.Dir)
	}
	decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(t.Name) + `\(\w+ \*testing\.T\)`)
	var found bool
	var all []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		found = found || decl.Match(b)
		all = append(all, string(b))
	}
	if !found {
		return fmt.Errorf("no func %s(*testing.T) in %s", t.Name, t.Dir)
	}
	if t.Sub == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "testdata", t.Sub+".txt")); err == nil {
		return nil
	}
	if slices.ContainsFunc(all, func(s string) bool { return strings.Contains(s, strconv.Quote(t.Sub)) }) {
		return nil
	}
	return fmt.Errorf("no subtest %q (neither testdata/%s.txt nor a quoted name) in %s", t.Sub, t.Sub, t.Dir)
}

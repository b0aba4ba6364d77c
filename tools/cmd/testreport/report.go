package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// marker starts the skip messages of tidemark's testenv package; a skip
// without it is listed too, flagged, so an unconverted t.Skip shows.
const marker = "SKIPPED:"

// event is one line of `go test -json` (cmd/test2json's TestEvent, with
// the build events go test adds).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type key struct{ pkg, test string }

type skipped struct {
	pkg, test, reason string
	marked            bool
}

type report struct {
	w       io.Writer
	verbose bool

	out       map[key][]string // output of tests and packages not finished yet
	passed    int
	failures  []key // failed tests, and packages that failed without a failed test
	skips     []skipped
	failPkgs  map[string]bool
	buildFail bool
	testFail  map[string]bool // packages with a failed test
	noTests   int
	pkgs      int
}

func newReport(w io.Writer, verbose bool) *report {
	return &report{w: w, verbose: verbose, out: map[key][]string{}, failPkgs: map[string]bool{}, testFail: map[string]bool{}}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(r.w, "%s\n", line)
			continue
		}
		r.event(e)
	}
	return sc.Err()
}

func (r *report) event(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		io.WriteString(r.w, e.Output)
	case "build-fail":
		r.buildFail = true // the package's own fail event follows
	case "output":
		r.out[k] = append(r.out[k], e.Output)
		if r.verbose {
			io.WriteString(r.w, e.Output)
		}
	case "pass":
		if e.Test == "" {
			r.pkgs++
			r.printPackageLines(k, "ok  ")
		} else {
			r.passed++
		}
		delete(r.out, k)
	case "skip":
		if e.Test == "" {
			r.noTests++
			r.printPackageLines(k, "?   ", "ok  ")
		} else {
			reason, marked := skipReason(r.out[k])
			r.skips = append(r.skips, skipped{e.Package, e.Test, reason, marked})
		}
		delete(r.out, k)
	case "fail":
		if e.Test != "" {
			r.testFail[e.Package] = true
			r.failures = append(r.failures, k)
			if !r.verbose {
				r.write(r.out[k])
			}
			delete(r.out, k)
			return
		}
		r.pkgs++
		r.failPkgs[e.Package] = true
		if !r.testFail[e.Package] {
			r.failures = append(r.failures, k)
		}
		// Tests still running when the package failed (a panic, a
		// timeout) have no event of their own: their output is the story.
		var open []key
		for o := range r.out {
			if o.pkg == e.Package && o.test != "" {
				open = append(open, o)
			}
		}
		sort.Slice(open, func(i, j int) bool { return open[i].test < open[j].test })
		if !r.verbose {
			for _, o := range open {
				r.write(r.out[o])
			}
			r.write(r.out[k])
		}
		for _, o := range open {
			delete(r.out, o)
		}
		delete(r.out, k)
	}
}

// printPackageLines prints a finished package's result lines, as go test
// does for a package that passed (its other output stays hidden).
func (r *report) printPackageLines(k key, prefixes ...string) {
	if r.verbose {
		return
	}
	for _, l := range r.out[k] {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				io.WriteString(r.w, l)
				break
			}
		}
	}
}

func (r *report) write(lines []string) {
	for _, l := range lines {
		io.WriteString(r.w, l)
	}
}

var logPrefix = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason finds why a test was skipped in its output: the line with
// the marker, else the last line that is not go test's own bookkeeping.
func skipReason(out []string) (string, bool) {
	last := ""
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		t = strings.TrimSpace(logPrefix.ReplaceAllString(l, ""))
		if i := strings.Index(t, marker); i >= 0 {
			return strings.TrimSpace(t[i+len(marker):]), true
		}
		last = t
	}
	if last == "" {
		last = "(no reason given)"
	}
	return last, false
}

func (r *report) failed() bool { return len(r.failures) > 0 || len(r.failPkgs) > 0 || r.buildFail }

func (r *report) summary() {
	fmt.Fprintf(r.w, "\n== %d passed, %d failed, %d skipped (%d packages tested, %d without tests)\n",
		r.passed, r.testFailures(), len(r.skips), r.pkgs, r.noTests)
	if r.failed() {
		fmt.Fprintln(r.w, "failed:")
		for _, f := range r.failures {
			if f.test == "" {
				fmt.Fprintf(r.w, "  %s (the package failed: build error, panic or timeout; its output is above)\n", f.pkg)
			} else {
				fmt.Fprintf(r.w, "  %s %s\n", f.pkg, f.test)
			}
		}
	}
	if len(r.skips) > 0 {
		fmt.Fprintln(r.w, "skipped:")
		for _, s := range r.skips {
			flag := ""
			if !s.marked {
				flag = " [skipped without testenv's " + marker + " marker]"
			}
			fmt.Fprintf(r.w, "  %s %s: %s%s\n", s.pkg, s.test, s.reason, flag)
		}
	}
}

func (r *report) testFailures() int {
	n := 0
	for _, f := range r.failures {
		if f.test != "" {
			n++
		}
	}
	return n
}

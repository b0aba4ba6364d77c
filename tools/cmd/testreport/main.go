// Command testreport reads `go test -json` (several runs one after another
// are fine, and lines that are not JSON, such as go's own errors on
// stderr or a Makefile's headers, are passed through) and prints what
// plain `go test ./...` would: an `ok`/`FAIL` line per package and the
// whole output of every failing test and package. At the end it prints
// the counts, the failed tests, and every skipped test with its reason,
// so a run can never skip a test without saying so. It exits 1 when any
// test or package failed.
//
// With -v it prints every test's output as it comes (go test -v).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	verbose := flag.Bool("v", false, "print every test's output as it comes, as go test -v does")
	flag.Parse()
	r := newReport(os.Stdout, *verbose)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: reading go test -json: %v\n", err)
		os.Exit(2)
	}
	r.summary()
	if r.failed() {
		os.Exit(1)
	}
}

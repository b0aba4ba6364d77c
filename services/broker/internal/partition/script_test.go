package partition

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// Scripted tests in the style of etcd-io/raft's interaction tests, run by
// cockroachdb/datadriven: each testdata/*.txt file is a sequence of
// commands, each followed by "----" and the output it must produce, ended
// by a blank line. Lines starting with "#" are comments. Run with -rewrite
// to regenerate the expected output.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &harness{}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				out, err := h.run(commandLine(d))
				if err != nil {
					t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
				}
				return strings.Join(out, "\n") + "\n"
			})
		})
	}
}

// commandLine puts a directive back into the one line the harness reads:
// the command, then its key=value arguments as written.
func commandLine(d *datadriven.TestData) string {
	parts := []string{d.Cmd}
	for _, a := range d.CmdArgs {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, " ")
}

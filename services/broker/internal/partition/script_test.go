package partition

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Scripted tests in the style of etcd-io/raft's interaction tests: each
// testdata/*.txt file is a sequence of commands, each followed by "----" and
// the output it must produce, ended by a blank line. Lines starting with "#"
// are comments. Run with -rewrite to regenerate the expected output.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata scripts with the actual output")

type scriptStep struct {
	pre  []string // comments and blank lines before the command
	cmd  string
	line int
	want []string
	got  []string
}

type script struct {
	steps []scriptStep
	tail  []string
}

func parseScript(data string) (script, error) {
	var sc script
	lines := strings.Split(strings.TrimRight(data, "\n"), "\n")
	var pre []string
	for i := 0; i < len(lines); {
		l := lines[i]
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			pre = append(pre, l)
			i++
			continue
		}
		st := scriptStep{pre: pre, cmd: l, line: i + 1}
		pre = nil
		i++
		if i >= len(lines) || lines[i] != "----" {
			return sc, fmt.Errorf("line %d: command %q is not followed by ----", st.line, l)
		}
		i++
		for i < len(lines) && lines[i] != "" {
			st.want = append(st.want, lines[i])
			i++
		}
		i++ // the blank line ending the block
		sc.steps = append(sc.steps, st)
	}
	sc.tail = pre
	return sc, nil
}

func (sc script) render() string {
	var b strings.Builder
	for _, st := range sc.steps {
		for _, l := range st.pre {
			b.WriteString(l + "\n")
		}
		b.WriteString(st.cmd + "\n----\n")
		for _, l := range st.got {
			b.WriteString(l + "\n")
		}
		b.WriteString("\n")
	}
	for _, l := range sc.tail {
		b.WriteString(l + "\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

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
			runScript(t, path)
		})
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := parseScript(string(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	h := &harness{}
	for i := range sc.steps {
		st := &sc.steps[i]
		got, err := h.run(st.cmd)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, st.line, st.cmd, err)
		}
		st.got = got
		if !*rewrite && !slices.Equal(got, st.want) {
			t.Errorf("%s:%d: %s\n--- want\n%s\n--- got\n%s", path, st.line, st.cmd,
				strings.Join(st.want, "\n"), strings.Join(got, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(sc.render()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseScriptRoundTrip(t *testing.T) {
	in := "# c\n\ncmd a=1\n----\nout 1\nout 2\n\nempty\n----\n\n# end\n"
	sc, err := parseScript(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.steps {
		sc.steps[i].got = sc.steps[i].want
	}
	if out := sc.render(); out != in {
		t.Fatalf("render:\n%q\nwant\n%q", out, in)
	}
	if _, err := parseScript("cmd\nnot a separator\n"); err == nil {
		t.Fatal("missing ---- not reported")
	}
}

package replica

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The manager reads time only through its Clock (seams.go), so that the
// tests' manualClock drives every timeout, lag check and timing: a direct
// wall-clock call would make a test depend on the real time again.
func TestNoWallClockOutsideTheSeam(t *testing.T) {
	wall := regexp.MustCompile(`\btime\.(Now|Since|Until|After|AfterFunc|Sleep|NewTimer|NewTicker|Tick)\(`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "seams.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if wall.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d reads the wall clock; use the manager's Clock: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

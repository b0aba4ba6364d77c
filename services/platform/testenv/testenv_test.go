package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder stands in for a test: it records the first Fatalf or Skipf
// instead of stopping.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.fatal == "" && r.skip == "" {
		r.fatal = fmt.Sprintf(format, args...)
	}
}
func (r *recorder) Skipf(format string, args ...any) {
	if r.fatal == "" && r.skip == "" {
		r.skip = fmt.Sprintf(format, args...)
	}
}
func (r *recorder) Skip(args ...any) {
	if r.fatal == "" && r.skip == "" {
		r.skip = fmt.Sprint(args...)
	}
}

func TestMissingToolFailsUnderCIAndSkipsWithTheMarkerElsewhere(t *testing.T) {
	for _, c := range []struct {
		ci       string
		wantFail bool
	}{{"true", true}, {"1", true}, {"", false}, {"false", false}, {"0", false}} {
		t.Run("CI="+c.ci, func(t *testing.T) {
			t.Setenv("CI", c.ci)
			r := &recorder{TB: t}
			RequireFile(r, "/nonexistent/.bin/jaeger", "Jaeger", "run make thirdparty")
			if c.wantFail {
				if r.fatal == "" || r.skip != "" {
					t.Fatalf("under CI=%q a missing tool must fail: fatal %q, skip %q", c.ci, r.fatal, r.skip)
				}
				if !strings.Contains(r.fatal, "Jaeger") || !strings.Contains(r.fatal, "make thirdparty") {
					t.Errorf("the failure must name the tool and how to install it: %q", r.fatal)
				}
				return
			}
			if r.skip == "" || r.fatal != "" {
				t.Fatalf("without CI a missing tool must skip: fatal %q, skip %q", r.fatal, r.skip)
			}
			if !strings.HasPrefix(r.skip, Marker) || !strings.Contains(r.skip, "make thirdparty") {
				t.Errorf("the skip must start with %q and say how to install: %q", Marker, r.skip)
			}
		})
	}
}

func TestPresentToolPasses(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	if p := RequireCommand(r, "a shell", "install bash", "no-such-tool-tidemark", "sh"); p == "" || r.fatal != "" || r.skip != "" {
		t.Fatalf("sh is on PATH: got %q, fatal %q, skip %q", p, r.fatal, r.skip)
	}
	RequireCommand(r, "nothing", "cannot be installed", "no-such-tool-tidemark")
	if !strings.Contains(r.fatal, "no-such-tool-tidemark") {
		t.Fatalf("a missing command is named: %q", r.fatal)
	}
}

func TestDesignedSkipCarriesTheMarker(t *testing.T) {
	r := &recorder{TB: t}
	Skipf(r, "opt-in: set %s=1", "TIDEMARK_E2E")
	if r.skip != Marker+" opt-in: set TIDEMARK_E2E=1" {
		t.Fatalf("skip message %q", r.skip)
	}
}

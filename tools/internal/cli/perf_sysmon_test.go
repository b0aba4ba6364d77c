package cli

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"tidemark.io/services/platform/sysmon"
)

func TestPerfRestartsOnceWithSysmonPolling(t *testing.T) {
	restartWith := func(on bool, environ []string, fail error) ([]string, string) {
		var got []string
		g := &globals{
			restart: func(env []string) error { got = env; return fail },
			environ: func() []string { return environ },
		}
		var stderr bytes.Buffer
		keepSysmonPolling(g, on, &stderr)
		return got, stderr.String()
	}
	if env, _ := restartWith(true, []string{"A=1"}, nil); !slices.Equal(env, []string{"A=1", "GODEBUG=" + sysmon.Setting}) {
		t.Fatalf("default: restarted with %q", env)
	}
	if env, _ := restartWith(true, []string{"GODEBUG=" + sysmon.Setting}, nil); env != nil {
		t.Fatalf("restarted process restarted again with %q", env)
	}
	if env, _ := restartWith(false, []string{"A=1"}, nil); env != nil {
		t.Fatalf("--sysmon-poll=false restarted with %q", env)
	}
	if _, warn := restartWith(true, nil, errors.New("no executable")); !strings.Contains(warn, "no executable") {
		t.Fatalf("a failed restart should warn, got %q", warn)
	}
	// Commands run inside a test process (no Restart) never restart it.
	keepSysmonPolling(&globals{environ: func() []string { return nil }}, true, &bytes.Buffer{})
}

package cli_test

import (
	"strings"
	"testing"

	"tidemark.io/tools/internal/cli"
)

func TestScenarioListNamesEveryScenario(t *testing.T) {
	r := runCLI(t, "", "scenario", "list")
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	for _, n := range []string{"hw-walkthrough", "follower-lag", "leader-crash", "network-partition", "isolated-leader", "partitioned-leader", "min-isr",
		"unclean-election", "kip101", "fast-leader-changes", "preferred-election", "controller-failover"} {
		if !strings.Contains(r.out, n) {
			t.Errorf("scenario list does not name %s:\n%s", n, r.out)
		}
	}
}

// With no launcher at --control the run fails at once, naming the address.
func TestScenarioRunWithoutDevClusterNamesTheLauncher(t *testing.T) {
	addr := closedAddr(t)
	r := runCLI(t, "", "scenario", "run", "min-isr", "--control", addr, "--plaintext")
	if r.code != cli.ExitFailed || !strings.Contains(r.err, addr) || !strings.Contains(r.err, "tidemark dev up") {
		t.Fatalf("exit %d, stderr %q: want 1 naming %s and tidemark dev up", r.code, r.err, addr)
	}
}

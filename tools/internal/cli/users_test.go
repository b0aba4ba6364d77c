package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// users set-scram, describe and delete: the credentials the SASL
// listeners log in against, kept by the controller.
func TestCLIUsers(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("wonderland\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.run(t, "", "users", "set-scram", "alice", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096", "--password-file", pw).ok(t)
	c.run(t, "", "users", "set-scram", "alice", "--password-file", pw).ok(t)
	r := c.run(t, "", "users", "describe").ok(t)
	if want := "USER   MECHANISM      ITERATIONS\nalice  SCRAM-SHA-256  4096\nalice  SCRAM-SHA-512  8192\n"; r.out != want {
		t.Fatalf("describe:\n%s\nwant\n%s", r.out, want)
	}
	c.run(t, "", "users", "describe", "bob").fails(t, cli.ExitFailed, "RESOURCE_NOT_FOUND")
	c.run(t, "", "users", "set-scram", "bob", "--iterations", "100", "--password-file", pw).fails(t, cli.ExitUsage, "iterations")
	c.run(t, "", "users", "set-scram", "bob", "--mechanism", "PLAIN", "--password-file", pw).fails(t, cli.ExitUsage, "--mechanism")
	c.run(t, "", "users", "delete", "alice", "--mechanism", "SCRAM-SHA-256").ok(t)
	if r := c.run(t, "", "users", "describe", "alice").ok(t); strings.Contains(r.out, "SCRAM-SHA-256") {
		t.Fatalf("SCRAM-SHA-256 left:\n%s", r.out)
	}
	c.run(t, "", "users", "delete", "alice").ok(t)
	c.run(t, "", "users", "delete", "alice").fails(t, cli.ExitFailed, "RESOURCE_NOT_FOUND")
}

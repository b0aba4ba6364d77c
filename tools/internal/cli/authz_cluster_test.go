package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// A topic the caller may not Describe is refused, not missing: the CLI
// named every per-topic error of its Metadata check "topic does not exist",
// so a principal without the right was told to look for a typo.
func TestCLISaysARefusedTopicIsRefusedNotMissing(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:alice Write Topic:orders\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startClusterWith(t, clustertest.Options{
		Adjust:           func(cfg *broker.Config) { cfg.Authz.ACLFile = acl },
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl },
	})
	c.run(t, "", "topics", "create", "--topic", "secret", "--partitions", "1", "--replication-factor", "3").ok(t)
	if _, err := pki.Ensure(c.PKIDir, pki.Leaf{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	alice := pki.Options(c.PKIDir, "alice")
	var flags []string
	for i := 0; i < len(c.flags); i += 2 {
		switch c.flags[i] {
		case "--tls.cert":
			flags = append(flags, c.flags[i], alice.Cert)
		case "--tls.key":
			flags = append(flags, c.flags[i], alice.Key)
		default:
			flags = append(flags, c.flags[i], c.flags[i+1])
		}
	}
	r := runCLI(t, "a\n", append([]string{"produce", "--topic", "secret"}, flags...)...).fails(t, cli.ExitFailed, "TOPIC_AUTHORIZATION_FAILED")
	if strings.Contains(r.err, "does not exist") {
		t.Fatalf("a refused topic reported missing:\n%s", r.err)
	}
	runCLI(t, "a\n", append([]string{"produce", "--topic", "ghost"}, flags...)...).fails(t, cli.ExitFailed, "TOPIC_AUTHORIZATION_FAILED")
}

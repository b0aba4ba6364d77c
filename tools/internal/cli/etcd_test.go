package cli_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/pki"
	"tidemark.io/tools/internal/cli"
)

// The CLI reads an etcd with TLS, client-certificate auth and roles on
// with the admin's certificate, and sets up users for new nodes as root.
func TestEtcdWithAuth(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, SecureEtcd: true})
	ep, dir := c.Etcd.Endpoint(), c.PKIDir
	cert := func(name string) []string {
		return []string{"--etcd-tls-ca", pki.CAPath(dir), "--etcd-tls-cert", pki.CertPath(dir, name), "--etcd-tls-key", pki.KeyPath(dir, name)}
	}

	t.Run("metadata dump", func(t *testing.T) {
		r := runCLI(t, "", "metadata", "dump", "--etcd-endpoints", ep, "--dev-pki", dir).ok(t)
		contains(t, r.out, "/tidemark/brokers/ids/1", "/tidemark/controller_epoch")
		runCLI(t, "", append([]string{"metadata", "dump", "--etcd-endpoints", ep, "--dev-pki", ""}, cert("admin")...)...).ok(t)
		runCLI(t, "", "metadata", "dump", "--etcd-endpoints", ep, "--dev-pki", "").
			fails(t, cli.ExitFailed, "wants TLS: give --etcd-tls-ca")
		runCLI(t, "", append([]string{"metadata", "dump", "--etcd-endpoints", ep}, cert("broker-1")...)...).
			fails(t, cli.ExitFailed, "permission denied")
		runCLI(t, "", "metadata", "dump", "--etcd-endpoints", ep, "--etcd-tls-cert", pki.CertPath(dir, "admin")).
			fails(t, cli.ExitUsage, "--etcd-tls-cert and --etcd-tls-key go together")
	})

	t.Run("metadata backup and restore", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "meta.json")
		r := runCLI(t, "", append([]string{"metadata", "backup", "--etcd-endpoints", ep, "--file", file}, cert("admin")...)...).ok(t)
		contains(t, r.out, "backed up", "of /tidemark at revision", file)
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		contains(t, string(raw), `"format": "tidemark-metadata-backup"`, `"kind": "controller_epoch"`, `"kind": "cluster_id"`)
		if strings.Contains(string(raw), `"kind": "broker"`) {
			t.Fatal("the backup holds a broker registration")
		}
		// The admin only reads; a restore needs write access (root here),
		// into an empty prefix.
		runCLI(t, "", append([]string{"metadata", "restore", "--etcd-endpoints", ep, "--etcd-prefix", "/restored", "--file", file}, cert("admin")...)...).
			fails(t, cli.ExitFailed, "permission denied")
		r = runCLI(t, "", append([]string{"metadata", "restore", "--etcd-endpoints", ep, "--etcd-prefix", "/restored", "--file", file}, cert("root")...)...).ok(t)
		contains(t, r.out, "restored", "epochs raised by 1000")
		runCLI(t, "", append([]string{"metadata", "restore", "--etcd-endpoints", ep, "--etcd-prefix", "/restored", "--file", file}, cert("root")...)...).
			fails(t, cli.ExitFailed, "restore writes into an empty prefix only")
		runCLI(t, "", append([]string{"metadata", "restore", "--etcd-endpoints", ep, "--file", file}, cert("root")...)...).
			fails(t, cli.ExitFailed, "already holds")
		runCLI(t, "", "metadata", "backup", "--etcd-endpoints", ep).fails(t, cli.ExitUsage, "--file is required")
	})

	t.Run("setup-auth adds a broker's user, as root only", func(t *testing.T) {
		if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-2"}); err != nil {
			t.Fatal(err)
		}
		broker2 := c.EtcdAs("broker-2", ep)
		if _, err := broker2.Dial(context.Background()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("broker-2 before setup: %v, want permission denied (no such user)", err)
		}
		runCLI(t, "", append([]string{"etcd", "setup-auth", "--etcd-endpoints", ep, "--brokers", "1,2", "--controllers", "1"}, cert("admin")...)...).
			fails(t, cli.ExitFailed, "permission denied")
		r := runCLI(t, "", "etcd", "setup-auth", "--etcd-endpoints", ep, "--pki", dir, "--brokers", "1,2", "--controllers", "1").ok(t)
		contains(t, r.out, "user broker-2: roles tidemark-broker, tidemark-broker-2", "user controller-1: role tidemark-controller", "user admin: role tidemark-admin")
		cli2, err := broker2.Dial(context.Background())
		if err != nil {
			t.Fatalf("broker-2 after setup: %v", err)
		}
		defer cli2.Close()
		if _, err := cli2.Put(context.Background(), "/tidemark/brokers/ids/1", "{}"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("broker-2 writes broker 1's key: %v, want permission denied", err)
		}
		runCLI(t, "", "etcd", "setup-auth", "--etcd-endpoints", ep, "--pki", dir).
			fails(t, cli.ExitUsage, "--brokers and --controllers are needed")
	})
}

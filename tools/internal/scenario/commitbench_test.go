package scenario

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

// TestGroupCommitsOnTheDevCluster is a measurement, not a check (make
// bench runs it with TIDEMARK_BENCH_DEVCLUSTER=1): 10 members of one group
// committing on a dev cluster of separate processes with mutual TLS, each
// commit one acks=all write to __consumer_offsets, through `tidemark perf
// commit`. It prints the tool's figures (commits/s and latency).
func TestGroupCommitsOnTheDevCluster(t *testing.T) {
	if os.Getenv("TIDEMARK_BENCH_DEVCLUSTER") != "1" {
		testenv.Skip(t, "opt-in: set TIDEMARK_BENCH_DEVCLUSTER=1 to measure commits on a dev cluster (make bench)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, _, _ := startCluster(ctx, t, nil, "")
	ports := cl.Options().Ports()
	sec := cl.Options().Security()
	bin := filepath.Join(cl.Options().BinDir, "tidemark")
	flags := []string{"--bootstrap-server", strings.Join(ports.Brokers, ","), "--controller", strings.Join(ports.Controllers, ","),
		"--tls.ca", sec.CA, "--tls.cert", sec.Cert, "--tls.key", sec.Key}
	for _, args := range [][]string{
		{"topics", "create", "--topic", "commits", "--partitions", "10", "--replication-factor", "3", "--config", "min.insync.replicas=2"},
		{"perf", "commit", "--topic", "commits", "--members", "10", "--num-commits", "10000"},
	} {
		out, err := exec.CommandContext(ctx, bin, append(args, flags...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tidemark %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "perf" {
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				t.Logf("dev cluster, 10 members: %s", l)
			}
		}
	}
}

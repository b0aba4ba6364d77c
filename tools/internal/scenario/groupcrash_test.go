package scenario

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

// TestGroupConsumerProcessKilledResumesAtItsCommit plays the note's
// promise with separate processes: a `tidemark consume --group` process
// reads the first half of a topic, commits it (its auto-commit), and is
// killed with SIGKILL; the second half is written; a new process of the
// same group starts exactly at the committed offsets: every record of the
// second half once, nothing skipped, nothing of the first half again. The
// group then shows no lag.
func TestGroupConsumerProcessKilledResumesAtItsCommit(t *testing.T) {
	testenv.SkipIfShort(t, "a dev cluster of real processes")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, _, _ := startCluster(ctx, t, nil, "")
	ports := cl.Options().Ports()
	sec := cl.Options().Security()
	bin := filepath.Join(cl.Options().BinDir, "tidemark")
	flags := []string{"--bootstrap-server", strings.Join(ports.Brokers, ","), "--controller", strings.Join(ports.Controllers, ","),
		"--tls.ca", sec.CA, "--tls.cert", sec.Cert, "--tls.key", sec.Key}
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, flags...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tidemark %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	values := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "r%04d\n", i)
		}
		return b.String()
	}
	run("", "topics", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	run(values(0, 300), "produce", "--topic", "orders", "--acks", "all")

	// The first member: reads everything there is, stays idle past one
	// auto-commit (every 5 s), then dies without a word.
	first := exec.CommandContext(ctx, bin, append([]string{"consume", "--group", "billing", "--topic", "orders", "--from-beginning"}, flags...)...)
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	lines := bufio.NewScanner(stdout)
	for len(seen) < 300 && lines.Scan() {
		seen[lines.Text()]++
	}
	if len(seen) < 300 {
		_ = first.Process.Kill()
		_ = first.Wait()
		t.Fatalf("the first member read %d of the 300 records", len(seen))
	}
	time.Sleep(7 * time.Second) // one auto-commit of what it printed
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	run(values(300, 600), "produce", "--topic", "orders", "--acks", "all")
	// The second member of the same group resumes at the commit; it stops
	// after 8 s without a record and commits on the way out.
	out := run("", "consume", "--group", "billing", "--topic", "orders", "--from-beginning", "--timeout-ms", "8000")
	got := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "r") {
			got[l]++
		}
	}
	for i := 300; i < 600; i++ {
		if v := fmt.Sprintf("r%04d", i); got[v] != 1 {
			t.Errorf("%s read %d times by the second member, want once", v, got[v])
		}
	}
	for v := range got {
		if seen[v] > 0 {
			t.Errorf("%s, committed by the first member before it was killed, was read again", v)
		}
	}
	desc := run("", "groups", "describe", "billing")
	t.Logf("after both members:\n%s", desc)
	for _, l := range strings.Split(desc, "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[1] == "orders" && f[5] != "0" {
			t.Errorf("partition %s still lags after the second member: %q", f[2], l)
		}
	}
}

package smoke

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

// readmeCommands returns the grpcurl recipes of the README, between its
// markers, one command a line.
func readmeCommands(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "<!-- grpcurl-recipes")
	end := strings.Index(s, "<!-- end grpcurl-recipes -->")
	if start < 0 || end < start {
		t.Fatal("README.md lost its grpcurl-recipes markers")
	}
	var cmds []string
	for _, line := range strings.Split(s[start:end], "\n") {
		if strings.HasPrefix(line, ".bin/grpcurl ") {
			cmds = append(cmds, line)
		}
	}
	if len(cmds) < 5 {
		t.Fatalf("only %d grpcurl recipes found in README.md", len(cmds))
	}
	return cmds
}

// The README's grpcurl recipes, run as written against `make run`'s dev
// cluster (the real binaries, on the documented ports, with mutual TLS on
// the certificates it makes), so they never rot. The recipes name
// .data/pki, `make run`'s; the test's cluster keeps its own in its data dir.
func TestReadmeGrpcurlRecipes(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts the dev cluster")
	}
	root := repoRoot(t)
	grpcurl := filepath.Join(root, ".bin", "grpcurl")
	testenv.RequireFile(t, grpcurl, "grpcurl", "`make tools` builds it (`make test` does)")
	for _, addr := range []string{"127.0.0.1:9092", "127.0.0.1:9190", "127.0.0.1:2379", "127.0.0.1:8080", "127.0.0.1:9299"} {
		if l, err := net.Listen("tcp", addr); err != nil {
			t.Fatalf("%s is taken (is a dev cluster running?): the README recipes need the documented ports", addr)
		} else {
			l.Close()
		}
	}
	bin := buildBinaries(t)
	data := t.TempDir()
	dev := exec.Command(filepath.Join(bin, "tidemark"), "dev", "up", "--data-dir", data, "--bin-dir", bin)
	var logs strings.Builder
	dev.Stdout, dev.Stderr = &logs, &logs
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = dev.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- dev.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = dev.Process.Kill()
			<-done
		}
	}()
	pkiDir := filepath.Join(data, "pki")
	run := func(cmd string) (string, error) {
		cmd = strings.ReplaceAll(strings.Replace(cmd, ".bin/grpcurl", grpcurl, 1), ".data/pki", pkiDir)
		c := exec.Command("bash", "-c", cmd)
		c.Dir = root
		out, err := c.CombinedOutput()
		return string(out), err
	}
	// Wait until the cluster is up and every broker is registered.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := run(`.bin/grpcurl -cacert .data/pki/ca.pem -cert .data/pki/admin.pem -key .data/pki/admin-key.pem 127.0.0.1:9190 tidemark.admin.v1.AdminService/DescribeCluster`)
		if err == nil && strings.Count(out, `"alive": true`) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev cluster not ready: %v\n%s\nlauncher:\n%s", err, out, logs.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	expect := map[string]string{
		"list":            "tidemark.broker.v1.BrokerService",
		"Health/Check":    "SERVING",
		"CreateTopics":    `"name": "orders"`,
		"Fetch":           "cGFpZA==",
		"DescribeTopics":  `"isr"`,
		"DescribeCluster": `"controllerEpoch"`,
		"FindCoordinator": `"coordinator"`,
	}
	for _, cmd := range readmeCommands(t, root) {
		if strings.Contains(cmd, "-plaintext") {
			t.Errorf("README recipe %q uses -plaintext: make run's cluster runs with mutual TLS", cmd)
			continue
		}
		var out string
		var err error
		// Produce right after CreateTopics may meet a leader still taking
		// office; the recipes are meant to be typed by hand, so allow a
		// short retry for retriable answers.
		for i := 0; i < 40; i++ {
			out, err = run(cmd)
			if err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("README recipe failed: %s\n%v\n%s", cmd, err, out)
		}
		for key, want := range expect {
			if strings.Contains(cmd, key) && !strings.Contains(out, want) {
				t.Errorf("README recipe %q: output lacks %q:\n%s", key, want, out)
			}
		}
	}
}

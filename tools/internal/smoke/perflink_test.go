package smoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/linkfloor"
)

func TestPerfLinkTimesTwoProcessesAndLeavesNoneBehind(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: builds the tidemark binary")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "tidemark.io/tools/cmd/tidemark")
	build.Dir = repoRoot(t)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "tidemark")

	cmd := exec.Command(bin, "perf", "link", "--json", "--size", "512", "--round-trips", "200", "--timeout", "30s")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// The echoing end writes to the same stderr: a peer left running would
	// hold it open, and Wait would give up after WaitDelay.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrWaitDelay) {
			t.Fatalf("the echoing process outlived the command: %s", errOut.String())
		}
		t.Fatalf("perf link: %v\n%s", err, errOut.String())
	}
	var res linkfloor.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if res.Size != 512 || res.RoundTrips != 200 {
		t.Fatalf("result %+v is not of the run asked for", res)
	}
	for name, l := range map[string]linkfloor.Latency{"TLS": res.TLS, "gRPC": res.GRPC} {
		if l.P50 <= 0 || l.P99 < l.P50 {
			t.Fatalf("%s: %+v", name, l)
		}
	}

	for _, bad := range [][]string{{"--size", "0"}, {"--round-trips", "-1"}, {"--size", "2000000"}, {"--serve"}} {
		out, err := exec.Command(bin, append([]string{"perf", "link"}, bad...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !bytes.Contains(out, []byte(bad[0])) {
			t.Errorf("perf link %v: %v: %s (want exit 2 naming %s)", bad, err, out, bad[0])
		}
	}
}

package cli_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/testbin"
)

// syncBuffer is a launcher's output, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launcher is a `tidemark dev up` process of one controller and one
// broker, without TLS.
type launcher struct {
	cmd     *exec.Cmd
	out     *syncBuffer
	control string
	exited  chan struct{}
}

func startLauncher(t *testing.T, bin, data string, base int) *launcher {
	t.Helper()
	l := &launcher{out: &syncBuffer{}, control: "127.0.0.1:" + strconv.Itoa(base+1), exited: make(chan struct{})}
	l.cmd = exec.Command(os.Args[0], "dev", "up", "--plaintext", "--brokers", "1", "--controllers", "1",
		"--port-base", strconv.Itoa(base), "--data-dir", data, "--bin-dir", bin)
	l.cmd.Env = append(os.Environ(), launcherEnv+"=1")
	l.cmd.Stdout, l.cmd.Stderr = l.out, l.out
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = l.cmd.Wait(); close(l.exited) }()
	t.Cleanup(func() {
		_ = l.cmd.Process.Kill() // its nodes die with it (parent-death signal)
		<-l.exited
	})
	l.waitFor(t, "stops the cluster", 90*time.Second)
	return l
}

// waitFor waits until the launcher has printed want.
func (l *launcher) waitFor(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(l.out.String(), want) {
		select {
		case <-l.exited:
			if strings.Contains(l.out.String(), want) {
				return
			}
			t.Fatalf("the launcher exited (%v) without printing %q:\n%s", l.cmd.ProcessState, want, l.out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher did not print %q within %s:\n%s", want, timeout, l.out)
		}
	}
}

// waitExit waits for the launcher's end and says how it ended.
func (l *launcher) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-l.exited:
	case <-time.After(timeout):
		t.Fatalf("the launcher did not exit within %s:\n%s", timeout, l.out)
	}
	if !l.cmd.ProcessState.Success() {
		t.Errorf("the launcher ended with %v, want exit 0 after its shutdown:\n%s", l.cmd.ProcessState, l.out)
	}
}

func (l *launcher) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := l.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
}

// A closed terminal sends the launcher SIGHUP: it stops the cluster as
// Ctrl-C does, each node gracefully, rather than dying at once and leaving
// its nodes to the parent-death SIGKILL. A second signal during a slow
// shutdown (etcd stopped: the broker's controlled shutdown finds no
// controller and waits) kills the nodes left at once, and says so.
func TestDevUpShutsDownOnHangupAndHurriesOnASecondSignal(t *testing.T) {
	testenv.SkipIfShort(t, "starts dev clusters of real processes")
	bin := testbin.Dir(t, filepath.Join("..", "..", ".."), "TIDEMARK_SCENARIO_BIN_DIR")
	base, err := loopback.FreeRange(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)), devcluster.PortSpan)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()

	t.Run("hangup", func(t *testing.T) {
		l := startLauncher(t, bin, data, base)
		l.signal(t, syscall.SIGHUP)
		l.waitExit(t, 60*time.Second)
		for _, want := range []string{"stopping the cluster", "stopped broker-1", "stopped controller-1", "stopped etcd"} {
			if !strings.Contains(l.out.String(), want) {
				t.Errorf("after SIGHUP the launcher did not print %q:\n%s", want, l.out)
			}
		}
	})

	t.Run("second signal", func(t *testing.T) {
		l := startLauncher(t, bin, data, base)
		runCLI(t, "", "dev", "stop", "etcd", "--plaintext", "--control", l.control).ok(t)
		l.signal(t, syscall.SIGINT)
		l.waitFor(t, "stopping the cluster", 30*time.Second)
		l.signal(t, syscall.SIGINT)
		l.waitExit(t, 60*time.Second)
		out := l.out.String()
		if !strings.Contains(out, "killing the nodes") {
			t.Errorf("the second signal was not answered by killing the nodes:\n%s", out)
		}
		if !strings.Contains(out, "broker-1 killed without waiting for its graceful stop") {
			t.Errorf("broker-1 was not killed at the second signal:\n%s", out)
		}
	})
}

package devcluster

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// A second Ctrl-C during the shutdown (Hurry) ends the stop in flight,
// here an action's stop of a node that ignores SIGTERM, and Down's own
// stops, by SIGKILL, without their 30 s grace.
func TestHurryKillsTheNodesStillStopping(t *testing.T) {
	stubborn := scriptNode(t, "broker-1", "")
	other := scriptNode(t, "broker-2", "")
	c := &Cluster{nodes: []*Node{stubborn, other}}
	svc := &controlService{c: c}
	startScript(t, stubborn)
	startScript(t, other)
	pids := []int{stubborn.PID(), other.PID()}
	stopped := make(chan error, 1)
	go func() {
		_, err := svc.NodeAction(context.Background(), &devclusterv1.NodeActionRequest{Name: "broker-1", Action: devclusterv1.Action_ACTION_STOP})
		stopped <- err
	}()
	waitState(t, stubborn, devclusterv1.NodeState_NODE_STATE_STOPPING)
	hurry := make(chan struct{})
	var out strings.Builder
	down := make(chan struct{})
	go func() { c.DownOr(&out, hurry); close(down) }()
	close(hurry)
	select {
	case <-down:
	case <-time.After(20 * time.Second):
		t.Fatal("Down still waits for graceful stops after Hurry")
	}
	if err := <-stopped; err == nil || !strings.Contains(err.Error(), "killed without waiting") {
		t.Errorf("the stop in flight: %v, want killed without waiting", err)
	}
	if !strings.Contains(out.String(), "broker-2 killed without waiting") {
		t.Errorf("Down's output: %q, want broker-2 killed without waiting", out.String())
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d is still running after Down", pid)
		}
	}
}

// A launcher started under nohup (SIGHUP ignored) keeps running when its
// terminal closes: it watches SIGHUP only when SIGHUP is not ignored.
func TestLauncherUnderNohupIgnoresHangup(t *testing.T) {
	if !slices.Contains(watched(), os.Signal(syscall.SIGHUP)) {
		t.Skip("this test process was started with SIGHUP ignored")
	}
	signal.Ignore(syscall.SIGHUP)
	defer signal.Reset(syscall.SIGHUP)
	if slices.Contains(watched(), os.Signal(syscall.SIGHUP)) {
		t.Errorf("watched %v with SIGHUP ignored, want it left ignored", watched())
	}
}

package devcluster

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// scriptNode is a node whose process is a shell script: onTerm is its
// SIGTERM trap ("" ignores SIGTERM).
func scriptNode(t *testing.T, name, onTerm string) *Node {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "node")
	// It says when its trap is set: a SIGTERM before that ends it at once.
	body := "#!/bin/sh\ntrap '" + onTerm + "' TERM\n: > " + filepath.Join(dir, "ready") + "\nwhile :; do sleep 0.1; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: name, Binary: script, LogPath: filepath.Join(dir, "log")}
	t.Cleanup(func() { _ = n.Kill() })
	return n
}

// startScript starts a scriptNode and waits until its trap is set.
func startScript(t *testing.T, n *Node) {
	t.Helper()
	ready := filepath.Join(filepath.Dir(n.Binary), "ready")
	_ = os.Remove(ready)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never set its trap", n.Name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive says whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces, the state follows its ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func waitState(t *testing.T, n *Node, want devclusterv1.NodeState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %v", n.Name, n.State(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The launcher's shutdown (Ctrl-C on `make run`) while a restart is in
// flight, from a console page or a scenario healing the cluster: the
// restart's new process is stopped with the rest, and an action after
// the shutdown began is refused rather than starting a node nothing will
// stop (it would die by the parent-death SIGKILL only when the launcher
// exits, without its graceful shutdown).
func TestDownStopsANodeRestartedDuringIt(t *testing.T) {
	slow := scriptNode(t, "broker-1", "sleep 1; exit 0") // its graceful stop takes a second
	gw := scriptNode(t, "gateway", "exit 0")
	c := &Cluster{nodes: []*Node{slow, gw}}
	svc := &controlService{c: c}
	for _, n := range c.nodes {
		startScript(t, n)
	}
	pids := []int{slow.PID(), gw.PID()}

	restarted := make(chan *devclusterv1.NodeActionResponse, 1)
	go func() {
		resp, err := svc.NodeAction(context.Background(), &devclusterv1.NodeActionRequest{Name: "broker-1", Action: devclusterv1.Action_ACTION_RESTART})
		if err != nil {
			t.Errorf("restart in flight: %v", err)
		}
		restarted <- resp
	}()
	waitState(t, slow, devclusterv1.NodeState_NODE_STATE_STOPPING) // the restart's stop is under way
	c.Down(io.Discard)
	select {
	case resp := <-restarted:
		if pid := int(resp.GetNode().GetPid()); pid > 0 {
			pids = append(pids, pid)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the restart never answered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := svc.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: "broker-1", Action: devclusterv1.Action_ACTION_START})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("a start after the shutdown began: %v, want UNAVAILABLE saying the cluster is shutting down", err)
	}
	if pid := int(resp.GetNode().GetPid()); pid > 0 {
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d is still running after Down", pid)
		}
	}
	for _, n := range c.nodes {
		if s := n.State(); s == devclusterv1.NodeState_NODE_STATE_RUNNING || s == devclusterv1.NodeState_NODE_STATE_PAUSED {
			t.Errorf("%s is %v after Down", n.Name, s)
		}
	}
}

// An action queued behind a slow one (two console pages clicking at
// once while a node takes its whole stop timeout) gives up when its call
// ends, with that call's status, and is not carried out afterwards behind
// the back of a caller already told it failed.
func TestQueuedNodeActionGivesUpWithItsCall(t *testing.T) {
	stubborn := scriptNode(t, "broker-1", "") // ignores SIGTERM: stopped by SIGKILL after the timeout
	other := scriptNode(t, "broker-2", "exit 0")
	c := &Cluster{nodes: []*Node{stubborn, other}, stopGrace: 2 * time.Second}
	svc := &controlService{c: c}
	startScript(t, stubborn)
	stopped := make(chan error, 1)
	go func() {
		_, err := svc.NodeAction(context.Background(), &devclusterv1.NodeActionRequest{Name: "broker-1", Action: devclusterv1.Action_ACTION_STOP})
		stopped <- err
	}()
	waitState(t, stubborn, devclusterv1.NodeState_NODE_STATE_STOPPING)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := svc.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: "broker-2", Action: devclusterv1.Action_ACTION_START})
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "not carried out") {
		t.Errorf("a start queued past its deadline: %v, want DEADLINE_EXCEEDED saying it was not carried out", err)
	}
	select {
	case err := <-stopped:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("stop of a node ignoring SIGTERM: %v, want killed after the timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stop never answered")
	}
	if s := other.State(); s == devclusterv1.NodeState_NODE_STATE_RUNNING {
		t.Errorf("broker-2 was started after its caller gave up (pid %d)", other.PID())
	}
	if alive(stubborn.PID()) || stubborn.State() != devclusterv1.NodeState_NODE_STATE_STOPPED {
		t.Errorf("broker-1 is %v after its stop", stubborn.State())
	}
}

// A restart of a node that ignores SIGTERM kills it after the grace and
// starts it again: RUNNING with a new pid, the kill noted in its log. It
// used to answer FAILED_PRECONDITION ("did not stop within ...; killed")
// and leave the node STOPPED although its process was gone and a restart
// was asked.
func TestRestartStartsANodeKilledAfterItsGrace(t *testing.T) {
	stubborn := scriptNode(t, "broker-1", "") // ignores SIGTERM
	c := &Cluster{nodes: []*Node{stubborn}, stopGrace: 500 * time.Millisecond}
	svc := &controlService{c: c}
	startScript(t, stubborn)
	old := stubborn.PID()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := svc.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: "broker-1", Action: devclusterv1.Action_ACTION_RESTART})
	if err != nil {
		t.Fatalf("restart of a node ignoring SIGTERM: %v, want it killed and started again", err)
	}
	n := resp.GetNode()
	if n.GetState() != devclusterv1.NodeState_NODE_STATE_RUNNING || n.GetPid() == 0 || int(n.GetPid()) == old {
		t.Errorf("after the restart broker-1 is %v with pid %d (old pid %d), want RUNNING with a new pid", n.GetState(), n.GetPid(), old)
	}
	if alive(old) {
		t.Errorf("the old process %d is still running", old)
	}
	log, err := os.ReadFile(stubborn.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "did not stop within 500ms; killed") {
		t.Errorf("broker-1's log does not note the kill:\n%s", log)
	}
}

package devcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// While a graceful stop is under way the node is STOPPING with its pid
// (its process lives on, for up to the stop timeout), not STOPPED with
// pid 0; a start meanwhile is refused saying so; once the process has
// ended it is STOPPED.
func TestStopShowsStoppingWhileTheProcessLives(t *testing.T) {
	slow := scriptNode(t, "broker-1", "sleep 1; exit 0")
	c := &Cluster{nodes: []*Node{slow}}
	svc := &controlService{c: c}
	startScript(t, slow)
	pid := slow.PID()
	stopped := make(chan error, 1)
	go func() {
		_, err := svc.NodeAction(context.Background(), &devclusterv1.NodeActionRequest{Name: "broker-1", Action: devclusterv1.Action_ACTION_STOP})
		stopped <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for slow.State() == devclusterv1.NodeState_NODE_STATE_RUNNING {
		if time.Now().After(deadline) {
			t.Fatal("the stop never began")
		}
		time.Sleep(5 * time.Millisecond)
	}
	list, err := svc.ListNodes(context.Background(), &devclusterv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.GetNodes() {
		if n.GetName() != "broker-1" {
			continue
		}
		if n.GetState() != devclusterv1.NodeState_NODE_STATE_STOPPING || int(n.GetPid()) != pid || !alive(pid) {
			t.Errorf("during its graceful stop broker-1 is %v with pid %d (process %d alive: %v), want STOPPING with its pid",
				n.GetState(), n.GetPid(), pid, alive(pid))
		}
	}
	if err := slow.Start(); err == nil || !strings.Contains(err.Error(), "still stopping") {
		t.Errorf("a start during the stop: %v, want refused as still stopping", err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stop never answered")
	}
	if n := slow.Proto(); n.GetState() != devclusterv1.NodeState_NODE_STATE_STOPPED || n.GetPid() != 0 || alive(pid) {
		t.Errorf("after the stop broker-1 is %v with pid %d, want STOPPED with pid 0 and its process gone", n.GetState(), n.GetPid())
	}
}

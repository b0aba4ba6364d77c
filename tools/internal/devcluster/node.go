// Package devcluster runs a whole tidemark cluster on one machine as separate
// processes — an embedded etcd, controllers, brokers and the gateway — and
// lets an operator stop, kill, pause and restart any one of them while the
// rest keep running, so the learning note's playbooks can be played by hand.
package devcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// startedMark is in the line the launcher writes to a node's log at each
// start (logTail finds the current process's output after it).
const startedMark = "started by tidemark dev"

// Node is one launched process.
type Node struct {
	Name string // broker-1, controller-2, gateway
	Kind string // broker, controller, gateway
	ID   int32
	Addr string // its gRPC (or HTTP) address
	// MetricsAddr serves /metrics.
	MetricsAddr string
	// ProfileAddr serves /debug/pprof/ (Options.Profiles), or "".
	ProfileAddr string
	// KafkaAddr is a broker's Kafka wire protocol listener.
	KafkaAddr string
	Binary    string
	Args      []string
	// Env is added to the launcher's environment (GOMAXPROCS).
	Env     []string
	LogPath string

	mu sync.Mutex
	// extraArgs were appended to Args for the current (or last) process; a
	// start without any goes back to Args alone.
	extraArgs []string
	cmd       *exec.Cmd
	state     devclusterv1.NodeState
	exited    chan struct{}
	logf      *os.File
}

// Proto renders the node for the DevClusterService.
func (n *Node) Proto() *devclusterv1.DevNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	pid := int32(0)
	if n.cmd != nil && n.cmd.Process != nil && n.state != devclusterv1.NodeState_NODE_STATE_EXITED &&
		n.state != devclusterv1.NodeState_NODE_STATE_STOPPED {
		pid = int32(n.cmd.Process.Pid)
	}
	return &devclusterv1.DevNode{Name: n.Name, Kind: n.Kind, Id: n.ID, Address: n.Addr, State: n.state, Pid: pid, LogFile: n.LogPath,
		ExtraArgs: append([]string(nil), n.extraArgs...)}
}

// State reports the node's process state.
func (n *Node) State() devclusterv1.NodeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// Start launches the process with its original flags, appending its output to
// its log file (see procAttr for its process group and parent-death signal).
func (n *Node) Start() error { return n.StartWith(nil) }

// StartWith launches the process with extra appended to its original flags
// (a later flag wins, so "--config=k=v" overrides the launch's own value).
// They hold for this process only: the next start without any drops them.
func (n *Node) StartWith(extra []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == devclusterv1.NodeState_NODE_STATE_RUNNING || n.state == devclusterv1.NodeState_NODE_STATE_PAUSED {
		return fmt.Errorf("%s is already running", n.Name)
	}
	if n.state == devclusterv1.NodeState_NODE_STATE_STOPPING {
		return fmt.Errorf("%s is still stopping", n.Name)
	}
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "\n==== %s %s at %s ====\n", n.Name, startedMark, time.Now().Format(time.RFC3339))
	if len(extra) > 0 {
		fmt.Fprintf(f, "==== extra arguments for this start: %s ====\n", strings.Join(extra, " "))
	}
	args := append(append([]string(nil), n.Args...), extra...)
	cmd := exec.Command(n.Binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(n.Env) > 0 {
		cmd.Env = append(os.Environ(), n.Env...)
	}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	n.cmd, n.logf = cmd, f
	n.extraArgs = append([]string(nil), extra...)
	n.state = devclusterv1.NodeState_NODE_STATE_RUNNING
	n.exited = make(chan struct{})
	go n.wait(cmd, n.exited, f)
	return nil
}

func (n *Node) wait(cmd *exec.Cmd, exited chan struct{}, f *os.File) {
	_ = cmd.Wait()
	n.mu.Lock()
	if n.cmd == cmd {
		// A process ends STOPPED when the launcher stopped (or killed) it,
		// EXITED when it ended on its own.
		if n.state == devclusterv1.NodeState_NODE_STATE_STOPPING || n.state == devclusterv1.NodeState_NODE_STATE_STOPPED {
			n.state = devclusterv1.NodeState_NODE_STATE_STOPPED
		} else {
			n.state = devclusterv1.NodeState_NODE_STATE_EXITED
		}
	}
	n.mu.Unlock()
	f.Close()
	close(exited)
}

// PID is the node's current process id, 0 when it is not running.
func (n *Node) PID() int {
	cmd, _, err := n.running()
	if err != nil || cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

func (n *Node) running() (*exec.Cmd, chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.state == devclusterv1.NodeState_NODE_STATE_EXITED || n.state == devclusterv1.NodeState_NODE_STATE_STOPPED {
		return nil, nil, fmt.Errorf("%s is not running", n.Name)
	}
	return n.cmd, n.exited, nil
}

// Stop sends SIGTERM (a graceful, controlled shutdown) and waits up to
// timeout, then SIGKILL.
func (n *Node) Stop(timeout time.Duration) error { return n.StopOr(timeout, nil) }

// StopOr is Stop that also sends SIGKILL as soon as hurry is closed (the
// launcher's second Ctrl-C); a nil hurry never is. The node is STOPPING,
// with its pid, until its process has ended, then STOPPED.
func (n *Node) StopOr(timeout time.Duration, hurry <-chan struct{}) error {
	cmd, exited, err := n.running()
	if err != nil {
		return err
	}
	n.setState(devclusterv1.NodeState_NODE_STATE_STOPPING)
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot handle SIGTERM
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-exited:
		return nil
	case <-hurry:
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s killed without waiting for its graceful stop", n.Name)
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-exited
		return &KilledAfterGraceError{Node: n.Name, Grace: timeout}
	}
}

// KilledAfterGraceError is a stop that ended in SIGKILL because the node
// ignored SIGTERM for its whole grace: a failure for a stop that asked for
// a graceful shutdown, but the process is gone all the same, so a restart
// goes on to its start.
type KilledAfterGraceError struct {
	Node  string
	Grace time.Duration
}

func (e *KilledAfterGraceError) Error() string {
	return fmt.Sprintf("%s did not stop within %s; killed", e.Node, e.Grace)
}

// Note appends a line of the launcher's to the node's log, where its
// operator looks for what became of it.
func (n *Node) Note(format string, args ...any) {
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "\n==== "+format+" ====\n", args...)
}

// Kill sends SIGKILL: a crash, with no chance to hand anything off.
func (n *Node) Kill() error {
	cmd, exited, err := n.running()
	if err != nil {
		return err
	}
	n.setState(devclusterv1.NodeState_NODE_STATE_STOPPED)
	_ = cmd.Process.Kill()
	<-exited
	return nil
}

// Quit sends SIGQUIT: a Go process prints every goroutine's stack to its
// log and exits, which shows where a stuck node is stuck.
func (n *Node) Quit(timeout time.Duration) error {
	cmd, exited, err := n.running()
	if err != nil {
		return err
	}
	n.setState(devclusterv1.NodeState_NODE_STATE_STOPPING)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not exit on SIGQUIT within %s; killed", n.Name, timeout)
	}
}

// Pause freezes the process (SIGSTOP), like a long GC pause or a hung host.
func (n *Node) Pause() error {
	cmd, _, err := n.running()
	if err != nil {
		return err
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.setState(devclusterv1.NodeState_NODE_STATE_PAUSED)
	return nil
}

// Resume continues a paused process (SIGCONT).
func (n *Node) Resume() error {
	cmd, _, err := n.running()
	if err != nil {
		return err
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.setState(devclusterv1.NodeState_NODE_STATE_RUNNING)
	return nil
}

func (n *Node) setState(s devclusterv1.NodeState) {
	n.mu.Lock()
	n.state = s
	n.mu.Unlock()
}

package benchcmp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runTool runs one benchmark tool to the end (or until timeout) and
// returns everything it printed; log gets the command line and output.
func runTool(ctx context.Context, timeout time.Duration, log *os.File, env []string, name string, args ...string) (string, error) {
	out, _, err := runToolCPU(ctx, timeout, log, env, name, args...)
	return out, err
}

// usage is what a process spent: CPU time (user + system) and context
// switches (its threads giving up the CPU, to wait or preempted).
type usage struct {
	cpu      time.Duration
	switches int64
}

// runToolCPU is runTool that also returns what the tool's process used.
func runToolCPU(ctx context.Context, timeout time.Duration, log *os.File, env []string, name string, args ...string) (string, usage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if log != nil {
		fmt.Fprintf(log, "$ %s %q\n%s\n", name, args, out.String())
	}
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("%s did not finish within %v", name, timeout)
	}
	var u usage
	if st := cmd.ProcessState; st != nil {
		u.cpu = st.UserTime() + st.SystemTime()
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			u.switches = ru.Nvcsw + ru.Nivcsw
		}
	}
	return out.String(), u, err
}

// userHZ is the unit of /proc/<pid>/stat's times: Linux reports them to
// user space in USER_HZ, fixed at 100 whatever the kernel's own tick.
const userHZ = 100

// cpuTimeOf is the CPU time (user + system) process pid has used so far.
func cpuTimeOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime + stime out of a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted after the last ')':
// state is field 3, utime 14, stime 15.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("too few fields in %q", stat)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", v, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// switchesOf is how many context switches process pid's threads have made
// so far, voluntary (to sleep or wait) and not (preempted): the sum over
// /proc/<pid>/task/*/status. A thread that exited takes its count with it;
// the servers measured keep their threads.
func switchesOf(pid int) (int64, error) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		return 0, err
	}
	if len(paths) == 0 {
		return 0, fmt.Errorf("process %d: no threads in /proc", pid)
	}
	var sum int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // a thread that ended since the listing
			}
			return 0, err
		}
		n, err := parseSwitches(string(b))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		sum += n
	}
	return sum, nil
}

// parseSwitches adds a status file's voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches.
func parseSwitches(status string) (int64, error) {
	var sum int64
	seen := 0
	for line := range strings.Lines(status) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", k, v, err)
		}
		sum += n
		seen++
	}
	if seen != 2 {
		return 0, errors.New("no voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines")
	}
	return sum, nil
}

// usageOfAll is what the processes have used together; a process that is
// gone is an error (its share would go missing).
func usageOfAll(pids []int) (usage, error) {
	var sum usage
	for _, pid := range pids {
		d, err := cpuTimeOf(pid)
		if err != nil {
			return usage{}, err
		}
		n, err := switchesOf(pid)
		if err != nil {
			return usage{}, err
		}
		sum.cpu += d
		sum.switches += n
	}
	return sum, nil
}

// daemon is a server process the harness started and must stop.
type daemon struct {
	name    string
	logPath string
	env     []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// startDaemon starts bin with env added to this process's environment,
// appending its output to logPath.
func startDaemon(name string, logPath string, env []string, bin string, args ...string) (*daemon, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	d := &daemon{name: name, logPath: logPath, env: env, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(d.done) }()
	return d, nil
}

// stop ends the process by its PID: SIGTERM, then SIGKILL after timeout.
func (d *daemon) stop(timeout time.Duration) error {
	select {
	case <-d.done:
		return nil
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(timeout):
	}
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s (pid %d): %w", d.name, d.cmd.Process.Pid, err)
	}
	<-d.done
	return nil
}

// kill sends SIGKILL (a crash) and waits until the process is gone.
func (d *daemon) kill() error {
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s (pid %d): %w", d.name, d.cmd.Process.Pid, err)
	}
	<-d.done
	return nil
}

// restarted starts the process again with the same command line and log.
func (d *daemon) restarted() (*daemon, error) {
	return startDaemon(d.name, d.logPath, d.env, d.cmd.Path, d.cmd.Args[1:]...)
}

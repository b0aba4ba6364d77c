package benchcmp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// OneCPU is the synchronous shapes measured again with every process of
// both systems allowed one CPU only. A synchronous write is a chain of
// hops between processes, one at a time; with two CPUs the kernel wakes
// each process on the CPU that is idle, and on a virtual machine whose
// idle vCPU halts, that wake-up waits for the hypervisor. On one CPU the
// same chain never waits for a second CPU. Set beside the main rows it
// says how much of each system's synchronous figure is that wait.
type OneCPU struct {
	CPU       int        `json:"cpu"`
	Rows      []Row      `json:"rows"`
	LinkFloor *LinkFloor `json:"link_floor,omitempty"`
	// Err says why the pass has no rows.
	Err string `json:"err,omitempty"`
}

// oneCPUShapes are the shapes of a one-CPU pass: the synchronous ones.
func oneCPUShapes(shapes []Shape) []string {
	var names []string
	for _, s := range shapes {
		if s.Mode == Sync {
			names = append(names, s.Name)
		}
	}
	return names
}

// measureOneCPU runs `tidemark bench compare` again, as a child process
// allowed CPU 0 only (its children inherit that), for the synchronous
// shapes, and returns its rows. The child measures with the parent's
// GOMAXPROCS for the servers and security, and no failover run.
func measureOneCPU(ctx context.Context, o Options, stamp string, out io.Writer) (*OneCPU, error) {
	names := oneCPUShapes(o.Shapes)
	if len(names) == 0 {
		return nil, fmt.Errorf("no synchronous shape selected")
	}
	dir := filepath.Join(o.OutDir, "compare-"+stamp+"-one-cpu")
	args := []string{"bench", "compare", "--one-cpu=false", "--kills", "0", "--shapes", strings.Join(names, ","),
		"--out-dir", dir, "--bin-dir", o.BinDir, "--nats-bin-dir", o.NatsBinDir, "--gomaxprocs", strconv.Itoa(o.Procs)}
	if o.Only != "" {
		args = append(args, "--only", o.Only)
	}
	if o.Plaintext {
		args = append(args, "--plaintext")
	}
	if o.Scale > 0 {
		args = append(args, "--scale", strconv.FormatFloat(o.Scale, 'g', -1, 64))
	}
	cmd := exec.CommandContext(ctx, filepath.Join(o.BinDir, "tidemark"), args...)
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errOut
	cmd.WaitDelay = 10 * time.Second
	const cpu = 0
	if err := startOnCPU(cmd, cpu); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "synchronous shapes again on CPU %d only (%s)\n", cpu, strings.Join(names, ", "))
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, lastLine(errOut.String()))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "compare-*.json"))
	if len(files) != 1 {
		return nil, fmt.Errorf("want one result in %s, found %d", dir, len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", files[0], err)
	}
	return &OneCPU{CPU: cpu, Rows: r.Rows, LinkFloor: r.LinkFloor}, nil
}

// startOnCPU starts cmd allowed only cpu. A new process takes the CPU mask
// of the thread that forks it, so the fork happens on a thread of its own
// whose mask is set first; that thread is never given back to the runtime
// (the goroutine ends locked to it, and the runtime ends the thread).
func startOnCPU(cmd *exec.Cmd, cpu int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("allowing this thread CPU %d only: %w", cpu, err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// oneCPUNote sets the one-CPU pass beside the main rows.
func (r *Result) oneCPUNote() string {
	oc := r.OneCPU
	switch {
	case oc == nil:
		return ""
	case oc.Err != "":
		return fmt.Sprintf("\n- The synchronous shapes were to run again with every process on one CPU, and did not: %s.\n", oc.Err)
	case len(oc.Rows) == 0:
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| synchronous shapes, every process of both systems on CPU %d only | tidemark msgs/s | JetStream msgs/s | ratio | p99 ratio | ratio with %s (above) |\n", oc.CPU, cpusOf(r.Machine))
	b.WriteString("|---|---:|---:|---:|---:|---:|\n")
	for _, row := range oc.Rows {
		t, j := row.Tidemark, row.JetStream
		main := "–"
		for _, m := range r.Rows {
			if m.Shape.Name == row.Shape.Name {
				main = ratio(m.Tidemark, m.JetStream, m.Tidemark.MsgsPerSec, m.JetStream.MsgsPerSec)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.Shape.Label(), rate(t), rate(j),
			ratio(t, j, t.MsgsPerSec, j.MsgsPerSec), ratio(t, j, float64(t.P99), float64(j.P99)), main)
	}
	b.WriteString("\n- The same synchronous shapes run again, after the main run, by a second `tidemark bench compare` allowed one CPU (its affinity, which every process it starts inherits): both systems' servers, clients and the link floor share CPU 0. A synchronous write is a chain of hops between processes taken one at a time; with two CPUs the kernel wakes each process on whichever CPU is idle, " + r.idleVCPUClause() + ".")
	if lf := oc.LinkFloor; lf != nil && len(lf.Runs) > 0 {
		fmt.Fprintf(&b, " The floor on one CPU: %d µs bare TLS, %d µs gRPC (median pair).", lf.median(false).Microseconds(), lf.median(true).Microseconds())
	}
	b.WriteString(" The targets above are judged on the main rows only; this table says how much of each system's synchronous figure is the wait for a second CPU.\n")
	return b.String()
}

// cpusOf is the CPU count of a Machine description ("2 × model, os"), as
// "2 CPUs", or "every CPU" when it has none.
func cpusOf(machine string) string {
	if n, _, ok := strings.Cut(machine, " × "); ok {
		if c, err := strconv.Atoi(n); err == nil {
			return fmt.Sprintf("%d CPUs", c)
		}
	}
	return "every CPU"
}

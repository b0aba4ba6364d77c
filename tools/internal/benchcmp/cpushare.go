package benchcmp

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// A CPU profile of a Go process charges the kernel's time in a system call
// to the Go frame that made it, so the stacks of one profile say both what
// the process did itself and what it asked the kernel to do, and for whom.
// cpuUse names the parts the report splits a process's CPU into.
type cpuUse int

const (
	useLogAppend    cpuUse = iota // the kernel writing appended batches into the page cache
	useLogRead                    // the kernel reading the log (fetches, recovery)
	useSocketWrite                // the kernel sending on sockets
	useSocketRead                 // the kernel receiving from sockets
	useSyscallOther               // every other system call
	useThreads                    // threads sleeping and waking, the Go scheduler
	useGC                         // garbage collection and allocation
	useTLS                        // encryption and decryption of TLS records
	useCopy                       // Go copying bytes (memmove)
	useProtobuf                   // encoding and decoding messages
	useGoOther                    // the rest: CRCs, HTTP/2 framing, the brokers' own code
	cpuUses
)

var cpuUseNames = [cpuUses]string{
	"log appends (kernel)", "log reads (kernel)", "socket writes (kernel)", "socket reads (kernel)",
	"other system calls", "threads and scheduler", "GC and allocation", "TLS", "copying bytes", "protobuf", "other Go code",
}

func (u cpuUse) String() string { return cpuUseNames[u] }

// ProcessCPU is where one process's CPU went over a profile's window.
type ProcessCPU struct {
	System  string `json:"system"`  // tidemark or jetstream
	Shape   string `json:"shape"`   // the shape's label
	Role    string `json:"role"`    // leader, follower or client
	Process string `json:"process"` // broker-N, or the client
	// Window is how long the profile sampled; CPU the time it counted.
	Window time.Duration `json:"window_ns"`
	CPU    time.Duration `json:"cpu_ns"`
	// Shares are CPU's fractions by cpuUse, in cpuUseNames' order.
	Shares []float64 `json:"shares"`
}

// Cores is the process's CPU over its window, in cores kept busy.
func (p ProcessCPU) Cores() float64 {
	if p.Window <= 0 {
		return 0
	}
	return float64(p.CPU) / float64(p.Window)
}

// cpuOfProfile reads a Go CPU profile (pprof format) and splits its CPU.
func cpuOfProfile(path string) (ProcessCPU, error) {
	f, err := os.Open(path)
	if err != nil {
		return ProcessCPU{}, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return ProcessCPU{}, fmt.Errorf("%s: %w", path, err)
	}
	value := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			value = i
		}
	}
	if value < 0 {
		return ProcessCPU{}, fmt.Errorf("%s: not a CPU profile (no cpu/nanoseconds samples)", path)
	}
	var by [cpuUses]int64
	var total int64
	var funcs []string
	for _, s := range p.Sample {
		funcs = funcs[:0]
		for _, loc := range s.Location { // the leaf first
			for _, line := range loc.Line { // the innermost inlined call first
				if line.Function != nil {
					funcs = append(funcs, line.Function.Name)
				}
			}
		}
		v := s.Value[value]
		by[classifyStack(funcs)] += v
		total += v
	}
	pc := ProcessCPU{Window: time.Duration(p.DurationNanos), CPU: time.Duration(total), Shares: make([]float64, cpuUses)}
	if total > 0 {
		for u := range by {
			pc.Shares[u] = float64(by[u]) / float64(total)
		}
	}
	return pc, nil
}

// classifyStack says what one sample's stack (function names, leaf first)
// was doing. A system call is charged to whatever it served, found up the
// stack; Go code by its own frame.
func classifyStack(funcs []string) cpuUse {
	if len(funcs) == 0 {
		return useGoOther
	}
	has := func(parts ...string) bool {
		for _, f := range funcs {
			for _, p := range parts {
				if strings.Contains(f, p) {
					return true
				}
			}
		}
		return false
	}
	leaf := funcs[0]
	scheduler := []string{"runtime.futex", "runtime.notewakeup", "runtime.notesleep", "runtime.schedule", "runtime.findRunnable",
		"runtime.mcall", "runtime.park_m", "runtime.sysmon", "runtime.netpoll", "runtime.usleep", "runtime.wakep", "runtime.goready"}
	switch {
	case has("runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart", "runtime.mallocgc"):
		return useGC
	case has(scheduler...):
		// epoll_wait and futex included: the runtime parking and waking
		return useThreads
	case isSyscall(leaf):
		switch {
		// tidemark's log; a nats-server's message blocks (its streams'
		// and its Raft logs' stores)
		case has("logstore.(*Log).append", "logstore.(*Log).Append", "server.(*msgBlock).writeAt", "server.(*msgBlock).flushPendingMsgs"):
			return useLogAppend
		case has("logstore.", "server.(*msgBlock)", "server.(*fileStore)") &&
			has("logstore.(*Log).read", "logstore.(*Log).Read", "ReadAt", "Pread", "os.(*File).Read", "os.ReadFile"):
			return useLogRead
		case has("internal/poll.(*FD).Write", "internal/poll.(*FD).Writev", "syscall.Sendmsg", "syscall.sendmsg"):
			return useSocketWrite
		case has("internal/poll.(*FD).Read", "syscall.Recvmsg", "syscall.recvmsg"):
			return useSocketRead
		}
		return useSyscallOther
	case strings.HasPrefix(leaf, "crypto/") || strings.HasPrefix(leaf, "vendor/golang.org/x/crypto/") || strings.HasPrefix(leaf, "golang.org/x/crypto/"):
		return useTLS
	case leaf == "runtime.memmove":
		return useCopy
	case strings.HasPrefix(leaf, "google.golang.org/protobuf/"):
		return useProtobuf
	}
	return useGoOther
}

// isSyscall is a frame that enters the kernel on behalf of Go code.
func isSyscall(fn string) bool {
	switch fn {
	case "internal/runtime/syscall/linux.Syscall6", "runtime/internal/syscall.Syscall6",
		"syscall.Syscall", "syscall.Syscall6", "syscall.RawSyscall", "syscall.RawSyscall6", "syscall.rawSyscallNoError",
		"syscall.rawVforkSyscall":
		return true
	}
	return false
}

// cpuUseTables are where each system's CPU went in the profiled runs, by
// cpuUseTable, with what the parts mean.
func (r *Result) cpuUseTables() string {
	t := r.cpuUseTable("tidemark", "tidemark", "brokers")
	j := r.cpuUseTable("jetstream", "JetStream", "nats-servers")
	if t == "" && j == "" {
		return ""
	}
	return t + j + "\n- Each shape run once more with every server process profiled (the files beside the report), over " +
		fmt.Sprintf("%d s", profileSeconds) + " of the run, and tidemark's client over all of it (JetStream's clients are not profiled). A Go CPU profile charges the kernel's time in a system call to the Go code that made it, so \"(kernel)\" is the kernel's work for that purpose, found up the stack: log appends are the writes of appended records into the page cache (a tidemark leader's produce and a follower's fetched batches; a nats-server's message blocks, its stream's and its Raft log's), socket writes and reads the links between processes (TLS records, gRPC or NATS frames); threads and scheduler is the Go runtime parking and waking threads (futex, epoll); GC and allocation includes the mark workers and allocating. The profiles count fewer cores than `/proc` does (they sample); the shares are what to read.\n"
}

// cpuUseTable is where one system's CPU went in the profiled runs: for
// each profiled shape, each part's share of the leader's, the followers'
// (together) and the client's CPU, then the servers' together in a note.
func (r *Result) cpuUseTable(system, name, servers string) string {
	var shapes []string
	type sums struct {
		by     [cpuUses]float64 // CPU ns by use
		cpu    float64
		window float64
	}
	per := map[string]map[string]*sums{} // shape → role → sums; role "brokers" is all three
	for _, p := range r.Profiles {
		if p.System != system && (p.System != "" || system != "tidemark") {
			continue
		}
		if per[p.Shape] == nil {
			per[p.Shape] = map[string]*sums{}
			shapes = append(shapes, p.Shape)
		}
		roles := []string{p.Role}
		if p.Role != "client" {
			roles = append(roles, "brokers")
		}
		for _, role := range roles {
			s := per[p.Shape][role]
			if s == nil {
				s = &sums{}
				per[p.Shape][role] = s
			}
			for u, share := range p.Shares {
				s.by[u] += share * float64(p.CPU)
			}
			s.cpu += float64(p.CPU)
			s.window += float64(p.Window)
		}
	}
	if len(shapes) == 0 {
		return ""
	}
	roles := []string{"leader", "follower", "client"}
	cell := func(shape string, f func(*sums) string) string {
		var parts []string
		for _, role := range roles {
			if s := per[shape][role]; s != nil && s.cpu > 0 {
				parts = append(parts, f(s))
			} else {
				parts = append(parts, "–")
			}
		}
		return strings.Join(parts, " / ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| where %s's CPU went, %% of each process's (profiled run) |", name)
	for _, shape := range shapes {
		fmt.Fprintf(&b, " %s: leader / followers / client |", shape)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(shapes)) + "\n")
	for u := range cpuUses {
		fmt.Fprintf(&b, "| %s |", cpuUse(u))
		for _, shape := range shapes {
			fmt.Fprintf(&b, " %s |", cell(shape, func(s *sums) string { return fmt.Sprintf("%.0f", 100*s.by[u]/s.cpu) }))
		}
		b.WriteString("\n")
	}
	b.WriteString("| CPU sampled, cores (followers: each) |")
	for _, shape := range shapes {
		fmt.Fprintf(&b, " %s |", cell(shape, func(s *sums) string { return fmt.Sprintf("%.2f", s.cpu/s.window) }))
	}
	b.WriteString("\n")
	var notes []string
	for _, shape := range shapes {
		s := per[shape]["brokers"]
		if s == nil || s.cpu <= 0 {
			continue
		}
		pct := func(us ...cpuUse) float64 {
			var v float64
			for _, u := range us {
				v += s.by[u]
			}
			return 100 * v / s.cpu
		}
		notes = append(notes, fmt.Sprintf("%s: log appends %.0f%%, sockets %.0f%%, threads and scheduler %.0f%%, TLS %.0f%%, GC and allocation %.0f%%, copying and protobuf %.0f%%",
			shape, pct(useLogAppend), pct(useSocketWrite, useSocketRead), pct(useThreads), pct(useTLS), pct(useGC), pct(useCopy, useProtobuf)))
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\n- The three %s' CPU together, by the same profiles: %s.\n", servers, strings.Join(notes, "; "))
	}
	return b.String()
}

package benchcmp

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
)

// Stacks as a broker's CPU profile holds them (leaf first, abridged).
func TestClassifyStackChargesSystemCallsToWhatTheyServe(t *testing.T) {
	for _, tc := range []struct {
		want  cpuUse
		stack []string
	}{
		{useLogAppend, []string{"internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", "syscall.Syscall6", "syscall.pwrite",
			"internal/poll.(*FD).Pwrite", "os.(*File).WriteAt", "tidemark.io/services/broker/internal/logstore.(*cachedFile).WriteAt",
			"tidemark.io/services/broker/internal/logstore.(*Log).appendLocked", "tidemark.io/services/broker/internal/logstore.(*Log).AppendAsLeader"}},
		{useLogRead, []string{"internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", "syscall.Syscall6", "syscall.pread",
			"internal/poll.(*FD).Pread", "os.(*File).ReadAt", "tidemark.io/services/broker/internal/logstore.(*cachedFile).ReadAt",
			"tidemark.io/services/broker/internal/logstore.(*Log).readInto", "tidemark.io/services/broker/internal/replica.(*Manager).ReplicaFetch"}},
		{useSocketWrite, []string{"internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", "syscall.Syscall", "syscall.write",
			"internal/poll.(*FD).Write", "net.(*netFD).Write", "net.(*conn).Write", "tidemark.io/services/platform/tlsconf.(*coalescedConn).Write",
			"google.golang.org/grpc/internal/transport.(*bufWriter).flushKeepBuffer"}},
		{useSocketRead, []string{"internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", "syscall.Syscall", "syscall.read",
			"internal/poll.(*FD).Read", "net.(*conn).Read", "crypto/tls.(*atLeastReader).Read", "crypto/tls.(*Conn).Read"}},
		{useThreads, []string{"internal/runtime/syscall/linux.Syscall6", "internal/runtime/syscall/linux.EpollWait", "runtime.netpoll",
			"runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"}},
		{useThreads, []string{"runtime.futex", "runtime.futexwakeup", "runtime.notewakeup", "runtime.startm", "runtime.wakep", "runtime.ready"}},
		{useGC, []string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker.func2", "runtime.systemstack", "runtime.gcBgMarkWorker"}},
		{useGC, []string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "runtime.makeslice", "bytes.growSlice"}},
		{useTLS, []string{"crypto/internal/fips140/aes/gcm.gcmAesEnc", "crypto/internal/fips140/aes/gcm.seal", "crypto/tls.(*halfConn).encrypt", "crypto/tls.(*Conn).Write"}},
		{useCopy, []string{"runtime.memmove", "google.golang.org/protobuf/internal/impl.consumeBytes", "google.golang.org/protobuf/proto.Unmarshal"}},
		{useProtobuf, []string{"google.golang.org/protobuf/internal/impl.(*MessageInfo).unmarshalPointer", "google.golang.org/protobuf/proto.Unmarshal"}},
		{useSyscallOther, []string{"internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", "syscall.Syscall", "syscall.fsync",
			"internal/poll.(*FD).Fsync", "os.(*File).Sync", "tidemark.io/services/broker/internal/logstore.(*Log).Flush"}},
		{useGoOther, []string{"hash/crc32.castagnoliSSE42Triple", "hash/crc32.Update", "tidemark.io/services/recordbatch.Validate"}},
		// a nats-server: its message blocks' writes, its client connections
		{useLogAppend, []string{"internal/runtime/syscall/linux.Syscall6", "syscall.Syscall6", "syscall.pwrite", "internal/poll.(*FD).Pwrite",
			"os.(*File).WriteAt", "github.com/nats-io/nats-server/v2/server.(*msgBlock).writeAt", "github.com/nats-io/nats-server/v2/server.(*msgBlock).flushPendingMsgsLocked"}},
		{useSocketWrite, []string{"internal/runtime/syscall/linux.Syscall6", "syscall.Syscall", "syscall.writev", "internal/poll.(*FD).Writev",
			"net.(*netFD).writeBuffers", "net.Buffers.WriteTo", "github.com/nats-io/nats-server/v2/server.(*client).flushOutbound"}},
		{useGoOther, nil},
	} {
		if got := classifyStack(tc.stack); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.stack, got, tc.want)
		}
	}
}

// A real CPU profile of this process while it mostly sends bytes over a
// loopback TCP connection: the split finds the sockets.
func TestCPUOfProfileSplitsARealProfile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	path := profileFor(t, time.Second, func() error {
		_, err := conn.Write(buf)
		return err
	})
	conn.Close()

	p, err := cpuOfProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.CPU <= 0 || p.Window < 900*time.Millisecond || p.Window > 10*time.Second {
		t.Fatalf("CPU %v over a window of %v, want some CPU over about a second", p.CPU, p.Window)
	}
	var sum float64
	for _, s := range p.Shares {
		sum += s
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares sum to %v: %v", sum, p.Shares)
	}
	// Under -race instrumented Go code takes half of it or more (three
	// quarters on a loaded machine, leaving the sockets 23%): a split that
	// did not recognise the socket writes would find next to none.
	if sockets := p.Shares[useSocketWrite] + p.Shares[useSocketRead]; sockets < 0.10 {
		t.Errorf("sockets %.0f%% of a process that did little else: %v", 100*sockets, p.Shares)
	}
	if _, err := cpuOfProfile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing profile read without an error")
	}
}

func TestCPUUseTableWeighsFollowersByTheirCPU(t *testing.T) {
	shares := func(kv map[cpuUse]float64) []float64 {
		s := make([]float64, cpuUses)
		for u, v := range kv {
			s[u] = v
		}
		return s
	}
	r := &Result{Profiles: []ProcessCPU{
		{System: "tidemark", Shape: "paced 1 KiB", Role: "client", Process: "client", Window: 8 * time.Second, CPU: 4 * time.Second, Shares: shares(map[cpuUse]float64{useSocketWrite: 0.5, useGoOther: 0.5})},
		{Shape: "paced 1 KiB", Role: "leader", Process: "broker-3", Window: 4 * time.Second, CPU: 2 * time.Second, Shares: shares(map[cpuUse]float64{useLogAppend: 0.25, useSocketWrite: 0.75})},
		{Shape: "paced 1 KiB", Role: "follower", Process: "broker-1", Window: 4 * time.Second, CPU: 1 * time.Second, Shares: shares(map[cpuUse]float64{useLogAppend: 1})},
		{Shape: "paced 1 KiB", Role: "follower", Process: "broker-2", Window: 4 * time.Second, CPU: 3 * time.Second, Shares: shares(map[cpuUse]float64{useLogAppend: 0.5, useThreads: 0.5})},
	}}
	r.Profiles = append(r.Profiles, ProcessCPU{System: "jetstream", Shape: "paced 1 KiB", Role: "leader", Process: "nats-1",
		Window: 4 * time.Second, CPU: 4 * time.Second, Shares: shares(map[cpuUse]float64{useTLS: 1})})
	md := r.cpuUseTables()
	for _, want := range []string{
		"| paced 1 KiB: leader / followers / client |",
		// followers: (1×1 + 3×0.5) / 4 = 62.5 %
		"| log appends (kernel) | 25 / 62 / 0 |",
		"| socket writes (kernel) | 75 / 0 / 50 |",
		"| threads and scheduler | 0 / 38 / 0 |",
		"| CPU sampled, cores (followers: each) | 0.50 / 0.50 / 0.50 |",
		// brokers: appends (0.5 + 1 + 1.5) / 6 = 50 %, sockets 1.5 / 6 = 25 %
		"three brokers' CPU together, by the same profiles: paced 1 KiB: log appends 50%, sockets 25%, threads and scheduler 25%",
		// JetStream's own table: its leader alone, no client
		"| where JetStream's CPU went, % of each process's (profiled run) | paced 1 KiB: leader / followers / client |",
		"| TLS | 100 / – / – |",
		"three nats-servers' CPU together, by the same profiles: paced 1 KiB: log appends 0%, sockets 0%, threads and scheduler 0%, TLS 100%",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(md, "A Go CPU profile charges") != 1 {
		t.Errorf("what the parts mean, want it once:\n%s", md)
	}
	if (&Result{}).cpuUseTables() != "" {
		t.Error("a run without profiles has a table")
	}
}

// The names the split looks for are the brokers' own: a CPU profile of
// real brokers (in this process) replicating acks=all writes finds their
// appends and their sockets. A renamed append path fails here rather than
// leave the report's row at zero.
func TestCPUOfProfileFindsTheBrokersAppends(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.CreateTopic("shares", 1, 3, map[string]string{"min.insync.replicas": "2"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := strings.Repeat("v", 32<<10)
	// The appends are a few percent of the CPU (less under the race
	// detector, which slows the Go code around them), so a short profile
	// can miss them by chance: up to three profiles, any finding both.
	// A renamed path misses in all three.
	for attempt := 1; ; attempt++ {
		path := profileFor(t, 2*time.Second, func() error {
			_, err := c.Produce(ctx, "shares", 0, -1, value)
			return err
		})
		p, err := cpuOfProfile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := p.Shares[useLogAppend] > 0 && p.Shares[useSocketWrite]+p.Shares[useSocketRead] > 0
		msg := fmt.Sprintf("log appends %.1f%%, socket writes %.1f%%, reads %.1f%% of brokers replicating 32 KiB writes: %v",
			100*p.Shares[useLogAppend], 100*p.Shares[useSocketWrite], 100*p.Shares[useSocketRead], p.Shares)
		switch {
		case found:
			return
		case attempt == 3:
			t.Fatalf("%s (in each of 3 profiles)", msg)
		}
		t.Logf("profile %d: %s; profiling again", attempt, msg)
	}
}

// profileFor writes a CPU profile of this process while it calls work
// again and again for d, and returns its path.
func profileFor(t *testing.T, d time.Duration, work func() error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatalf("a CPU profile of the test process: %v", err)
	}
	defer pprof.StopCPUProfile()
	for began := time.Now(); time.Since(began) < d; {
		if err := work(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

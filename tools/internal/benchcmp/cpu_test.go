package benchcmp

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A stat line's times are counted after the last ')': the command name
// may hold spaces and parentheses.
func TestParseStatCPU(t *testing.T) {
	line := "4242 (nats (server) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 130 0 0 20 0 9 0 100 1000000 500 18446744073709551615\n"
	d, err := parseStatCPU(line)
	if err != nil || d != 3800*time.Millisecond {
		t.Fatalf("got %v, %v; want 3.8s (380 ticks of 1/100 s)", d, err)
	}
	for _, bad := range []string{"4242 nats S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 u 130"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// This process's CPU time as /proc gives it grows with work done, as the
// Go runtime's own rusage says.
func TestCPUTimeOfFollowsWork(t *testing.T) {
	before, err := cpuTimeOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// CPU time, not wall time: a wall-clock burn got half of it on a
	// loaded CI machine.
	burnCPU(300 * time.Millisecond)
	after, err := cpuTimeOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if used := after - before; used < 200*time.Millisecond {
		t.Fatalf("burned 300ms of CPU, /proc says %v", used)
	}
	if _, err := usageOfAll([]int{os.Getpid(), 1 << 30}); err == nil {
		t.Fatal("a process that is gone must be an error, not 0")
	}
}

// A tool's CPU time is its process's, not the harness's.
func TestRunToolCPUIsTheToolsProcess(t *testing.T) {
	sh := "/bin/sh"
	if _, err := os.Stat(sh); err != nil {
		t.Fatal("this test needs /bin/sh")
	}
	out, u, err := runToolCPU(context.Background(), time.Minute, nil, nil, sh, "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done")
	if err != nil || strings.TrimSpace(out) != "done" {
		t.Fatalf("%q, %v", out, err)
	}
	if u.cpu < 50*time.Millisecond {
		t.Fatalf("a shell counting to 300000 used %v of CPU", u.cpu)
	}
	_, idle, err := runToolCPU(context.Background(), time.Minute, nil, nil, sh, "-c", "sleep 0.3")
	if err != nil || idle.cpu > 100*time.Millisecond {
		t.Fatalf("sleeping 0.3s used %v of CPU (%v)", idle, err)
	}
}

// burnCPU spins until this process's CPU time (getrusage) has grown by d,
// for at most 20 s of wall time.
func burnCPU(d time.Duration) {
	self := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := self()
	for deadline := time.Now().Add(20 * time.Second); self()-start < d && time.Now().Before(deadline); {
		burn(5 * time.Millisecond)
	}
}

func burn(d time.Duration) {
	x := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 1000 {
			x += i
		}
	}
	_ = x
}

// burningSide spends CPU in its "servers" (this process) and reports a
// client's CPU, as the sides do.
type burningSide struct {
	burn, client time.Duration
	// naps is how many times the "servers" sleep 1 ms (each a context
	// switch of this process); clientSwitches the client's switches.
	naps           int
	clientSwitches int64
}

func (b *burningSide) start(context.Context) error { return nil }
func (b *burningSide) stop()                       {}
func (b *burningSide) serverPIDs() []int           { return []int{os.Getpid()} }
func (b *burningSide) run(_ context.Context, s Shape) Figure {
	if s.Name == "warmup" {
		return Figure{MsgsPerSec: 1}
	}
	burnCPU(b.burn)
	for range b.naps {
		time.Sleep(time.Millisecond)
	}
	return withClientCPU(Figure{MsgsPerSec: 1000, Records: s.Records}, usage{cpu: b.client, switches: b.clientSwitches})
}

// Each row's figure has the servers' and the client's CPU per record, and
// the table gives them side by side with the cores they kept busy.
func TestRowsCarryCPUPerRecord(t *testing.T) {
	res := &Result{Rows: []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1, Records: 1000}}}}
	measureTidemark(t, res, &burningSide{burn: 300 * time.Millisecond, client: 500 * time.Millisecond})
	f := res.Rows[0].Tidemark
	if f.ServerCPU < 200*time.Microsecond || f.ServerCPU > 2*time.Millisecond {
		t.Fatalf("servers burned 300ms over 1000 records: %v per record", f.ServerCPU)
	}
	if f.ClientCPU != 500*time.Microsecond {
		t.Fatalf("client 500ms over 1000 records: %v per record", f.ClientCPU)
	}

	r := &Result{Rows: []Row{
		{Shape: Shape{Mode: Sync, Size: 128, Producers: 1},
			Tidemark:  Figure{MsgsPerSec: 2000, ServerCPU: 500 * time.Microsecond, ClientCPU: 200 * time.Microsecond},
			JetStream: Figure{MsgsPerSec: 1500, ServerCPU: 700 * time.Microsecond, ClientCPU: 300 * time.Microsecond}},
		{Shape: Shape{Mode: Paced, Size: 1024, Fraction: 0.5},
			Tidemark:  Figure{MsgsPerSec: 100, ServerCPU: 40 * time.Microsecond, ClientCPU: 10 * time.Microsecond},
			JetStream: Figure{MsgsPerSec: 100, ServerCPU: 50 * time.Microsecond}},
		{Shape: Shape{Mode: Batch, Size: 128}, Tidemark: Figure{Err: "broke"}, JetStream: Figure{MsgsPerSec: 10}},
	}}
	md := r.Markdown()
	requireLines(t, md,
		"| sync, 1 producer, 128 B | 500 | 200 | 700 | 300 | 0.71 | 1.40 / 1.50 |",
		"| batching producer at half peak, 1 KiB (ack latency) | 40 | 10 | 50 | – | 0.80 | 0.01 / – |")
	if strings.Contains(md, "| batching producer, 128 B | – | – | – | – |") {
		t.Errorf("a row neither system measured is left out:\n%s", md)
	}
}

func TestParseSwitchesAddsVoluntaryAndNot(t *testing.T) {
	status := "Name:\tbroker\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t34\n"
	if n, err := parseSwitches(status); err != nil || n != 1234 {
		t.Fatalf("got %d, %v; want 1234", n, err)
	}
	for _, bad := range []string{"Name:\tx\n", "voluntary_ctxt_switches:\t12\n", "voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n"} {
		if _, err := parseSwitches(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// This process's threads switch at least once per sleep, and /proc says so.
func TestSwitchesOfCountsSleeps(t *testing.T) {
	before, err := switchesOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		time.Sleep(time.Millisecond)
	}
	after, err := switchesOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 50 {
		t.Fatalf("50 sleeps, %d context switches", after-before)
	}
	if _, err := switchesOf(1 << 30); err == nil {
		t.Fatal("a process that is gone must be an error, not 0")
	}
}

// A tool's context switches are its process's (and its children's, which
// it waited for), from the rusage of its exit.
func TestRunToolCountsTheToolsSwitches(t *testing.T) {
	_, u, err := runToolCPU(context.Background(), time.Minute, nil, nil, "/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do sleep 0.01; done")
	if err != nil {
		t.Fatal(err)
	}
	if u.switches < 20 {
		t.Fatalf("a shell that waited for 20 sleeps made %d context switches", u.switches)
	}
}

// Each row's figure has the servers' and the client's context switches per
// record, and the CPU table gives them beside the CPU time, with the price
// of one switch on the machine.
func TestRowsCarrySwitchesPerRecord(t *testing.T) {
	res := &Result{Rows: []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1, Records: 10}}}}
	measureTidemark(t, res, &burningSide{naps: 40, clientSwitches: 70})
	f := res.Rows[0].Tidemark
	if f.ServerSwitches < 4 {
		t.Fatalf("servers slept 40 times over 10 records: %v switches per record", f.ServerSwitches)
	}
	if f.ClientSwitches != 7 {
		t.Fatalf("client switched 70 times over 10 records: %v per record", f.ClientSwitches)
	}

	r := &Result{Rows: []Row{
		{Shape: Shape{Mode: Sync, Size: 128, Producers: 1},
			Tidemark:  Figure{MsgsPerSec: 2000, ServerCPU: 500 * time.Microsecond, ClientCPU: 200 * time.Microsecond, ServerSwitches: 14.6, ClientSwitches: 6.8},
			JetStream: Figure{MsgsPerSec: 1500, ServerCPU: 700 * time.Microsecond, ClientCPU: 300 * time.Microsecond, ServerSwitches: 12.7, ClientSwitches: 5.6}},
		{Shape: Shape{Mode: Paced, Size: 1024, Fraction: 0.5},
			Tidemark:  Figure{MsgsPerSec: 100, ServerCPU: 40 * time.Microsecond, ClientCPU: 10 * time.Microsecond, ServerSwitches: 0.5, ClientSwitches: 0.25},
			JetStream: Figure{MsgsPerSec: 100, ServerCPU: 50 * time.Microsecond, ServerSwitches: 0.75}},
	}}
	md := r.Markdown()
	requireLines(t, md,
		"| sync, 1 producer, 128 B | 500 | 200 | 700 | 300 | 0.71 | 1.40 / 1.50 | 14.6 / 6.8 | 12.7 / 5.6 |",
		"| batching producer at half peak, 1 KiB (ack latency) | 40 | 10 | 50 | – | 0.80 | 0.01 / – | 0.5 / 0.2 | 0.8 / – |")
	if strings.Contains(md, "A thread's sleep and wake-up cost") {
		t.Errorf("no price of a switch was measured, yet one is printed:\n%s", md)
	}
	r.SleepWake = SleepWake{CPU: 17400 * time.Nanosecond, Wall: 99 * time.Microsecond}
	if md = r.Markdown(); !strings.Contains(md, "A thread's sleep and wake-up cost 17.4 µs of CPU on this machine and took 99 µs") {
		t.Errorf("the price of a switch is missing:\n%s", md)
	}
}

func TestMeasureSleepWake(t *testing.T) {
	sw, err := measureSleepWake(200)
	if err != nil {
		t.Fatal(err)
	}
	if sw.Wall < time.Microsecond || sw.CPU <= 0 || sw.CPU > sw.Wall {
		t.Fatalf("a sleep of 1 µs: %+v", sw)
	}
}

package sysmon

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the child processes of the tests below.
const childEnv = "TIDEMARK_SYSMON_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "reexec":
		if env, changed := Env(os.Environ()); changed {
			if err := Reexec(append(env, "TIDEMARK_SYSMON_TEST_RESTARTED=1")); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
		fmt.Printf("pid=%d restarted=%s active=%v GODEBUG=%s\n", os.Getpid(), os.Getenv("TIDEMARK_SYSMON_TEST_RESTARTED"), Active(), os.Getenv("GODEBUG"))
		os.Exit(0)
	case "echo":
		echo(os.Getenv("TIDEMARK_SYSMON_TEST_ADDR"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestEnvAddsTheSettingOnce(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []string
		changed bool
	}{
		{[]string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=" + Setting}, true},
		{[]string{"GODEBUG=", "A=1"}, []string{"GODEBUG=" + Setting, "A=1"}, true},
		{[]string{"GODEBUG=gctrace=1"}, []string{"GODEBUG=gctrace=1," + Setting}, true},
		// A second GODEBUG is not the one the runtime reads: dropped.
		{[]string{"GODEBUG=gctrace=1", "GODEBUG=schedtrace=0"}, []string{"GODEBUG=gctrace=1," + Setting}, true},
		// The operator's own schedtrace, whatever it is, stays: 0 turns it off.
		{[]string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}, false},
		{[]string{"GODEBUG=gctrace=1,schedtrace=1000"}, []string{"GODEBUG=gctrace=1,schedtrace=1000"}, false},
	} {
		got, changed := Env(tc.in)
		if !slices.Equal(got, tc.want) || changed != tc.changed {
			t.Errorf("Env(%q) = %q, %v; want %q, %v", tc.in, got, changed, tc.want, tc.changed)
		}
	}
}

func TestPollsReadsTheLastSchedtrace(t *testing.T) {
	for godebug, want := range map[string]bool{
		"": false, Setting: true, "gctrace=1," + Setting: true, "schedtrace=0": false,
		"schedtrace=1000,schedtrace=0": false, "schedtrace=x": false, "gctrace=1": false,
	} {
		if got := Polls(godebug); got != want {
			t.Errorf("Polls(%q) = %v, want %v", godebug, got, want)
		}
	}
}

// Reexec starts the same executable again in the same process, with the
// setting in its environment; the new image does not start again.
func TestReexecRestartsTheProcessWithTheSetting(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(withoutGODEBUG(), childEnv+"=reexec")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	want := fmt.Sprintf("pid=%d restarted=1 active=true GODEBUG=%s\n", cmd.Process.Pid, Setting)
	if string(out) != want {
		t.Fatalf("child printed %q, want %q (same PID, started again, setting on)", out, want)
	}
}

// What the setting is for: a process that idles between messages, as a
// broker does between the hops of a synchronous write, no longer wakes
// sysmon's thread on every message. Each child echoes bytes over loopback
// TCP; the parent pauses between round trips so that every P of the child
// idles. Without the setting each round trip costs the child at least one
// more context switch (sysmon woken from deep sleep, then polling).
func TestSettingStopsSysmonWakingPerMessage(t *testing.T) {
	const trips = 600
	perTrip := func(godebug string) float64 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(withoutGODEBUG(), childEnv+"=echo", "TIDEMARK_SYSMON_TEST_ADDR="+ln.Addr().String(), "GOMAXPROCS=1", "GODEBUG="+godebug)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		conn, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		trip := func() {
			if _, err := conn.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Microsecond)
		}
		for range 100 { // warm up: the child's threads started
			trip()
		}
		before := switches(t, cmd.Process.Pid)
		for range trips {
			trip()
		}
		return float64(switches(t, cmd.Process.Pid)-before) / trips
	}
	without := perTrip("schedtrace=0")
	with := perTrip(Setting)
	t.Logf("child's context switches per round trip: %.2f without the setting, %.2f with it", without, with)
	if without-with < 0.5 {
		t.Fatalf("the setting saved %.2f context switches per round trip (%.2f → %.2f), want at least 0.5: sysmon still wakes per message", without-with, without, with)
	}
}

// echo answers every byte from addr with one byte, until the connection ends.
func echo(addr string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	buf := make([]byte, 1)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
		if _, err := conn.Write(buf); err != nil {
			return
		}
	}
}

// switches sums the voluntary and involuntary context switches of every
// thread of pid.
func switches(t *testing.T, pid int) int64 {
	t.Helper()
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(files) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var n int64
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue // a thread that ended
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
		fh.Close()
	}
	return n
}

func withoutGODEBUG() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
}

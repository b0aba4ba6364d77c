package benchcmp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadHaltPoll(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		text string
		ns   int64
		ok   bool
	}{
		{"0\n", 0, true},
		{"200000\n", 200000, true},
		{"fast\n", 0, false},
		{"-5\n", 0, false},
	} {
		p := filepath.Join(dir, "guest_halt_poll_ns")
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if ns, ok := readHaltPoll(p); ns != c.ns || ok != c.ok {
			t.Errorf("%q: got %d, %v; want %d, %v", c.text, ns, ok, c.ns, c.ok)
		}
	}
	if _, ok := readHaltPoll(filepath.Join(dir, "absent")); ok {
		t.Error("a machine without the setting must say it has none")
	}
}

func TestMarkdownSaysWhatAnIdleVCPUDid(t *testing.T) {
	rows := []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1}}}
	if md := (&Result{Rows: rows}).Markdown(); strings.Contains(md, "guest_halt_poll_ns") {
		t.Errorf("a machine without the setting must not be described by it:\n%s", md)
	}
	zero, polls := int64(0), int64(50000)
	md := (&Result{Rows: rows, HaltPollNs: &zero}).Markdown()
	if !strings.Contains(md, "idle vCPU halts at once (`guest_halt_poll_ns` 0; Linux polls 200 µs first by default)") {
		t.Errorf("a vCPU that halts at once must be said to:\n%s", md)
	}
	md = (&Result{Rows: rows, HaltPollNs: &polls}).Markdown()
	if !strings.Contains(md, "polls for work 50 µs before it halts (`guest_halt_poll_ns` 50000") || strings.Contains(md, "halts at once") {
		t.Errorf("a vCPU that polls must be said to, with its time:\n%s", md)
	}
	// The one-CPU pass's note says the same of the run's machine.
	one := &OneCPU{Rows: []Row{{Shape: rows[0].Shape, Tidemark: Figure{MsgsPerSec: 3000}, JetStream: Figure{MsgsPerSec: 2000}}}}
	md = (&Result{Rows: rows, HaltPollNs: &zero, OneCPU: one}).Markdown()
	if !strings.Contains(md, "an idle vCPU of this VM halts at once, so each such hop waits") {
		t.Errorf("the one-CPU note of a machine whose vCPUs halt at once must say so:\n%s", md)
	}
	md = (&Result{Rows: rows, HaltPollNs: &polls, OneCPU: one}).Markdown()
	if !strings.Contains(md, "idle for longer than its halt polling (50 µs) has halted") || strings.Contains(md, "halts at once") {
		t.Errorf("the one-CPU note of a machine whose vCPUs poll must say for how long:\n%s", md)
	}
	// The setting survives the JSON the README's table is made from.
	b, err := json.Marshal(&Result{HaltPollNs: &zero})
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.HaltPollNs == nil || *back.HaltPollNs != 0 {
		t.Fatalf("round trip of %s: %v, %v", b, back.HaltPollNs, err)
	}
}

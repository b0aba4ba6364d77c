package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONLogsCarryServiceAndNode(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, Options{Level: "info", Format: "json"}, "broker", 3)
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hidden")
	l.Info("Shrinking ISR from 1,2,3 to 1,2", "topic", "orders")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line (debug filtered), got %q", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["service"] != "broker" || rec["node"] != float64(3) || rec["topic"] != "orders" {
		t.Fatalf("record %v", rec)
	}
}

func TestBadOptionsNameTheFlag(t *testing.T) {
	if err := (Options{Level: "loud", Format: "text"}).Validate(); err == nil || !strings.Contains(err.Error(), "--log.level") {
		t.Fatalf("bad level: %v", err)
	}
	if err := (Options{Level: "info", Format: "xml"}).Validate(); err == nil || !strings.Contains(err.Error(), "--log.format") {
		t.Fatalf("bad format: %v", err)
	}
}

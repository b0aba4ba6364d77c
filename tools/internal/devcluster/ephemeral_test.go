package devcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withEphemeralRange points the range file at one holding r.
func withEphemeralRange(t *testing.T, r string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ip_local_port_range")
	if err := os.WriteFile(f, []byte(r), 0o644); err != nil {
		t.Fatal(err)
	}
	old := ephemeralRangeFile
	ephemeralRangeFile = f
	t.Cleanup(func() { ephemeralRangeFile = old })
}

// A --port-base inside the kernel's ephemeral range is warned about,
// naming the range and a base outside it; one below it, and the
// documented ports under Linux's default range, are not.
func TestEphemeralOverlapWarnsAboutAPortBaseInTheRange(t *testing.T) {
	withEphemeralRange(t, "32768\t60999\n")
	o := DefaultOptions()
	o.PortBase = 40000
	w := EphemeralOverlap(o)
	for _, want := range []string{"32768-60999", "40000-", "address already in use", "--port-base from 1024 to 32708 or above 60999"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning for --port-base 40000 lacks %q: %q", want, w)
		}
	}
	o.PortBase = 32730 // its last ports (metrics, Kafka listeners) reach into the range
	if w := EphemeralOverlap(o); !strings.Contains(w, "(32770-32782)") {
		t.Errorf("warning for --port-base 32730: %q, want the ports 32770-32782 named", w)
	}
	o.PortBase = 20000
	if w := EphemeralOverlap(o); w != "" {
		t.Errorf("--port-base 20000 lies below the range, got %q", w)
	}
	if w := EphemeralOverlap(DefaultOptions()); w != "" {
		t.Errorf("the documented ports lie below the default range, got %q", w)
	}
	withEphemeralRange(t, "1024 65535")
	if w := EphemeralOverlap(DefaultOptions()); !strings.Contains(w, "no --port-base") {
		t.Errorf("documented ports inside a widened range: %q, want advice", w)
	}
	withEphemeralRange(t, "garbage")
	o.PortBase = 40000
	if w := EphemeralOverlap(o); w != "" {
		t.Errorf("an unreadable range warns of nothing, got %q", w)
	}
}

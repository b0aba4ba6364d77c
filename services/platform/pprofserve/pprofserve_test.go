package pprofserve

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestRefusesAddressesOffLoopback(t *testing.T) {
	for addr, reason := range map[string]string{
		"0.0.0.0:6060":  "the profiles are unauthenticated: bind a loopback address (127.0.0.1 or ::1)",
		"10.1.2.3:6060": "the profiles are unauthenticated: bind a loopback address (127.0.0.1 or ::1)",
		":6060":         "the profiles are unauthenticated: bind a loopback address (127.0.0.1 or ::1)",
		"127.0.0.1":     "want host:port: address 127.0.0.1: missing port in address",
	} {
		stop, err := Start(addr, slog.New(slog.DiscardHandler))
		want := `invalid value "` + addr + `" for --pprof.listen (TIDEMARK_PPROF_LISTEN): ` + reason
		if err == nil || err.Error() != want {
			if stop != nil {
				stop()
			}
			t.Errorf("%s: got %v, want %s", addr, err, want)
		}
	}
}

func TestServesProfilesOnLoopback(t *testing.T) {
	// Served on an open listener: no window in which the port is free.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	stop := Serve(l, slog.New(slog.DiscardHandler))
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "pprofserve") {
		t.Fatalf("cmdline: %s %q, want 200 naming the test binary", resp.Status, body)
	}
}

func TestEmptyAddressServesNothing(t *testing.T) {
	stop, err := Start("", slog.New(slog.DiscardHandler))
	if err != nil || stop == nil {
		t.Fatalf("got stop %v, err %v: want a no-op stop and no error", stop != nil, err)
	}
	stop()
}

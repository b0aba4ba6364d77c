package config

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestEnvThenFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	id := fs.Int("broker.id", 1, "")
	lag := fs.Int("replica.lag.time.max.ms", 30000, "")
	var eps StringList
	fs.Var(&eps, "etcd.endpoints", "")
	env := map[string]string{
		"TIDEMARK_BROKER_ID":               "2",
		"TIDEMARK_REPLICA_LAG_TIME_MAX_MS": "5000",
		"TIDEMARK_ETCD_ENDPOINTS":          "a:1, b:2",
	}
	if err := Parse(fs, []string{"--broker.id=3"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if *id != 3 {
		t.Errorf("flag should beat env: id=%d", *id)
	}
	if *lag != 5000 {
		t.Errorf("env should beat default: lag=%d", *lag)
	}
	if len(eps) != 2 || eps[1] != "b:2" {
		t.Errorf("list = %v", eps)
	}
}

func TestBadEnvNamesFlagAndVariable(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("broker.id", 1, "")
	err := Parse(fs, nil, func(k string) string {
		if k == "TIDEMARK_BROKER_ID" {
			return "one"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "--broker.id") || !strings.Contains(err.Error(), "TIDEMARK_BROKER_ID") {
		t.Fatalf("error should name the flag and the variable: %v", err)
	}
}

func TestInvalidMessage(t *testing.T) {
	err := Invalid("listen", "nope", "must be host:port")
	want := `invalid value "nope" for --listen (TIDEMARK_LISTEN): must be host:port`
	if err.Error() != want {
		t.Fatalf("got %q", err.Error())
	}
}

// TestDurationMsTakesMilliseconds: the one duration convention takes whole
// milliseconds, from the flag or its environment twin, and names what is
// wrong otherwise.
func TestDurationMsTakesMilliseconds(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	d := 6 * time.Second
	DurationMs(fs, &d, "x.timeout.ms", "a timeout")
	if err := fs.Parse([]string{"--x.timeout.ms=2500"}); err != nil || d != 2500*time.Millisecond {
		t.Fatalf("--x.timeout.ms=2500: %v, %v", d, err)
	}
	for _, bad := range []string{"6s", "-1", "1.5"} {
		if err := fs.Parse([]string{"--x.timeout.ms=" + bad}); err == nil {
			t.Errorf("--x.timeout.ms=%s accepted", bad)
		}
	}
	if u := fs.Lookup("x.timeout.ms").Usage; !strings.Contains(u, "default 6000") {
		t.Errorf("usage %q does not give the default in ms", u)
	}
}

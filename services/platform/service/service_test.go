package service

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"tidemark.io/services/platform/logging"
)

type fake struct {
	failed  chan error
	stopped chan struct{}
}

func (f *fake) Failed() <-chan error { return f.failed }

func (f *fake) Stop(context.Context) error { close(f.stopped); return nil }

// program is a binary with one flag, --fake.name (env TIDEMARK_FAKE_NAME),
// whose Start is start.
func program(out *bytes.Buffer, env map[string]string, name *string,
	start func(ctx context.Context, log *slog.Logger) (*fake, error)) Program[*fake] {
	return Program[*fake]{
		Name:     "fake",
		AddFlags: func(fs *flag.FlagSet) { fs.StringVar(name, "fake.name", "default", "a name") },
		Logging:  func() (logging.Options, int32) { return logging.DefaultOptions(), 7 },
		Start:    start,
		Stderr:   out,
		Getenv:   func(k string) string { return env[k] },
	}
}

func notStarted(t *testing.T) func(context.Context, *slog.Logger) (*fake, error) {
	return func(context.Context, *slog.Logger) (*fake, error) {
		t.Error("started")
		return nil, errors.New("started")
	}
}

func TestHelpPrintsEveryFlagWithItsVariableAndSucceeds(t *testing.T) {
	var out bytes.Buffer
	var name string
	if err := Run(context.Background(), program(&out, nil, &name, notStarted(t)), []string{"-h"}); err != nil {
		t.Fatalf("-h: %v", err)
	}
	if !strings.Contains(out.String(), "Usage of fake:") || !strings.Contains(out.String(), "--fake.name (env TIDEMARK_FAKE_NAME") {
		t.Fatalf("usage:\n%s", out.String())
	}
}

func TestBadFlagAndBadEnvValueAreErrors(t *testing.T) {
	var out bytes.Buffer
	var name string
	err := Run(context.Background(), program(&out, nil, &name, notStarted(t)), []string{"--no.such"})
	if err == nil || !strings.Contains(err.Error(), "flag provided but not defined: -no.such") {
		t.Fatalf("unknown flag: %v", err)
	}
	p := program(&out, nil, &name, notStarted(t))
	p.AddFlags = func(fs *flag.FlagSet) { fs.Int("fake.count", 0, "a count") }
	p.Getenv = func(k string) string { return map[string]string{"TIDEMARK_FAKE_COUNT": "x"}[k] }
	err = Run(context.Background(), p, nil)
	if err == nil || !strings.Contains(err.Error(), `invalid value "x" for --fake.count (TIDEMARK_FAKE_COUNT)`) {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestEnvTwinSetsTheFlagAndTheCommandLineWins(t *testing.T) {
	var out bytes.Buffer
	var name string
	env := map[string]string{"TIDEMARK_FAKE_NAME": "from-env"}
	started := errors.New("start refused")
	start := func(context.Context, *slog.Logger) (*fake, error) { return nil, started }
	if err := Run(context.Background(), program(&out, env, &name, start), nil); !errors.Is(err, started) || name != "from-env" {
		t.Fatalf("env: err %v, name %q", err, name)
	}
	if err := Run(context.Background(), program(&out, env, &name, start), []string{"--fake.name=flag"}); !errors.Is(err, started) || name != "flag" {
		t.Fatalf("flag over env: err %v, name %q", err, name)
	}
}

func TestStopAskedForDuringStartupIsClean(t *testing.T) {
	var out bytes.Buffer
	var name string
	ctx, cancel := context.WithCancel(context.Background())
	start := func(ctx context.Context, _ *slog.Logger) (*fake, error) {
		cancel() // the signal arrives while etcd is still out of reach
		<-ctx.Done()
		return nil, errors.New("connecting to etcd: context canceled")
	}
	if err := Run(ctx, program(&out, nil, &name, start), nil); err != nil {
		t.Fatalf("stop during startup: %v", err)
	}
	if !strings.Contains(out.String(), "stopped before startup completed") {
		t.Fatalf("log:\n%s", out.String())
	}
}

func TestStopsOnCancelAndReportsAFailure(t *testing.T) {
	var out bytes.Buffer
	var name string
	f := &fake{failed: make(chan error, 1), stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	start := func(context.Context, *slog.Logger) (*fake, error) { cancel(); return f, nil }
	if err := Run(ctx, program(&out, nil, &name, start), nil); err != nil {
		t.Fatalf("stop on signal: %v", err)
	}
	<-f.stopped

	f = &fake{failed: make(chan error, 1), stopped: make(chan struct{})}
	lost := errors.New("registration lost")
	f.failed <- lost
	start = func(context.Context, *slog.Logger) (*fake, error) { return f, nil }
	if err := Run(context.Background(), program(&out, nil, &name, start), nil); !errors.Is(err, lost) {
		t.Fatalf("failure: %v", err)
	}
	<-f.stopped
	if !strings.Contains(out.String(), `msg="shutting down" service=fake node=7 reason="registration lost"`) {
		t.Fatalf("log lines do not carry the node id:\n%s", out.String())
	}
}

// gcPercentAtStart runs a program whose default collector target is 400
// with args and env, and returns the target its Start saw.
func gcPercentAtStart(t *testing.T, env map[string]string, args ...string) (int, string, error) {
	t.Helper()
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	var out bytes.Buffer
	var name string
	seen := -2
	errStop := errors.New("seen")
	p := program(&out, env, &name, func(context.Context, *slog.Logger) (*fake, error) {
		seen = debug.SetGCPercent(100)
		return nil, errStop
	})
	p.GCPercent = 400
	err := Run(context.Background(), p, args)
	if errors.Is(err, errStop) {
		err = nil
	}
	return seen, out.String(), err
}

func TestGCPercentDefaultEnvAndFlag(t *testing.T) {
	if got, log, err := gcPercentAtStart(t, nil); err != nil || got != 400 || !strings.Contains(log, "gc_percent=400") {
		t.Fatalf("default: target %d, err %v, log:\n%s", got, err, log)
	}
	// GOGC in the environment: the runtime already applied it; the
	// program's default does not replace it.
	if got, log, err := gcPercentAtStart(t, map[string]string{"GOGC": "150"}); err != nil || got != 100 || !strings.Contains(log, "gogc=150") {
		t.Fatalf("with GOGC: target %d, err %v, log:\n%s", got, err, log)
	}
	if got, _, err := gcPercentAtStart(t, map[string]string{"GOGC": "150"}, "--gc.percent", "250"); err != nil || got != 250 {
		t.Fatalf("flag over GOGC: target %d, err %v", got, err)
	}
	if got, _, err := gcPercentAtStart(t, map[string]string{"TIDEMARK_GC_PERCENT": "300"}); err != nil || got != 300 {
		t.Fatalf("env twin: target %d, err %v", got, err)
	}
	if _, _, err := gcPercentAtStart(t, nil, "--gc.percent", "0"); err == nil || !strings.Contains(err.Error(), "--gc.percent") || !strings.Contains(err.Error(), "must be positive") {
		t.Fatalf("--gc.percent 0: %v", err)
	}
}

// sysmonAtStart runs a program with SysmonPoll in environ and args, with a
// restart that records the environment it was given and fails with
// restartErr (a real one does not return); it says whether the service
// started, the restart's environment (nil: none) and the log.
func sysmonAtStart(t *testing.T, environ []string, restartErr error, args ...string) (bool, []string, string) {
	t.Helper()
	var out bytes.Buffer
	var name string
	started := false
	errStop := errors.New("seen")
	p := program(&out, nil, &name, func(context.Context, *slog.Logger) (*fake, error) {
		started = true
		return nil, errStop
	})
	p.SysmonPoll = true
	p.environ = func() []string { return environ }
	var restartEnv []string
	p.reexec = func(env []string) error {
		restartEnv = env
		return restartErr
	}
	if err := Run(context.Background(), p, args); !errors.Is(err, errStop) {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return started, restartEnv, out.String()
}

func TestSysmonPollRestartsWithTheSettingOnce(t *testing.T) {
	const setting = "GODEBUG=schedtrace=2147483647"
	_, env, log := sysmonAtStart(t, []string{"PATH=/bin"}, nil)
	if !slices.Equal(env, []string{"PATH=/bin", setting}) || !strings.Contains(log, "starting again") {
		t.Fatalf("default: restarted with %q, log:\n%s", env, log)
	}
	// The restarted process, or an operator's schedtrace: no restart.
	for godebug, want := range map[string]string{setting: "monitor thread polls", "GODEBUG=schedtrace=0": "may deep-sleep"} {
		if started, env, log := sysmonAtStart(t, []string{godebug}, nil); env != nil || !started || !strings.Contains(log, want) {
			t.Fatalf("%s: restarted with %q, started %v, log (want %q):\n%s", godebug, env, started, want, log)
		}
	}
	if started, env, log := sysmonAtStart(t, nil, nil, "--sysmon.poll=false"); env != nil || !started || !strings.Contains(log, "may deep-sleep") {
		t.Fatalf("--sysmon.poll=false: restarted with %q, started %v, log:\n%s", env, started, log)
	}
	// A restart that fails is logged, and the service starts as it is.
	if started, env, log := sysmonAtStart(t, nil, errors.New("no executable")); env == nil || !started || !strings.Contains(log, "no executable") {
		t.Fatalf("failed restart: restarted with %q, started %v, log:\n%s", env, started, log)
	}
}

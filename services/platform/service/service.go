// Package service is the one main of tidemark's server binaries (broker,
// controller, gateway): flags and their environment twins, -h, the log,
// SIGINT/SIGTERM, a clean stop even before startup completes, an orderly
// shutdown, and the exit code.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/pprofserve"
	"tidemark.io/services/platform/sysmon"
)

// Running is a started service: it reports a fatal error on Failed and
// stops within Stop's context.
type Running interface {
	lifecycle.Stopper
	Failed() <-chan error
}

// Program is one binary.
type Program[S Running] struct {
	// Name is the binary's name, in usage, errors and log lines.
	Name string
	// AddFlags registers the binary's flags on its configuration.
	AddFlags func(*flag.FlagSet)
	// Logging returns the parsed log options and the node id its lines
	// carry (-1 for none).
	Logging func() (logging.Options, int32)
	// Start starts the service; ctx is cancelled by SIGINT or SIGTERM.
	Start func(ctx context.Context, log *slog.Logger) (S, error)

	// Stderr receives usage, errors and logs; nil is os.Stderr.
	Stderr io.Writer
	// Getenv reads the flags' environment twins; nil is os.Getenv.
	Getenv func(string) string
	// Profiles adds --pprof.listen (off by default, loopback only).
	Profiles bool
	// GCPercent, when positive, adds --gc.percent with this default: the
	// garbage collector's target growth of the heap over the live data
	// (what GOGC sets). A GOGC in the environment wins over the default,
	// the flag or its twin over both.
	GCPercent int
	// SysmonPoll adds --sysmon.poll, on by default: the process starts
	// again at once with GODEBUG=schedtrace set, which keeps the runtime's
	// monitor thread from deep-sleeping whenever the process idles and
	// being woken by the next system call (package sysmon).
	SysmonPoll bool

	// reexec replaces the process (Main: sysmon.Reexec); nil, as in tests
	// that call Run, never restarts. environ is os.Environ unless set.
	reexec  func(env []string) error
	environ func() []string
}

// Main runs p with the process's arguments and exits: 0 after -h or a clean
// stop, 1 after any error (printed as "name: error").
func Main[S Running](p Program[S]) {
	p.reexec = sysmon.Reexec
	if err := Run(context.Background(), p, os.Args[1:]); err != nil {
		fmt.Fprintf(p.stderr(), "%s: %v\n", p.Name, err)
		os.Exit(1)
	}
}

// Run parses args, starts the service and waits until ctx is done, a signal
// arrives or the service fails, then stops it. It returns nil for -h and
// for a stop asked for while still starting (etcd not reachable yet, say):
// that is a clean stop, not a failure.
func Run[S Running](ctx context.Context, p Program[S], args []string) error {
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(p.stderr())
	p.AddFlags(fs)
	var pprofAddr *string
	if p.Profiles {
		pprofAddr = pprofserve.AddFlag(fs)
	}
	sysmonPoll := p.SysmonPoll
	if p.SysmonPoll {
		fs.BoolVar(&sysmonPoll, sysmonPollFlag, true, "keep the Go runtime's monitor thread polling (every 10 ms when idle) instead of deep-sleeping whenever the process idles and being woken by the next system call: the process starts again at once with GODEBUG=schedtrace set; a schedtrace already in GODEBUG is kept (0 turns it off)")
	}
	gcPercent := p.GCPercent
	if p.GCPercent > 0 {
		fs.IntVar(&gcPercent, gcPercentFlag, p.GCPercent, "the garbage collector's target: the heap may grow this many percent over the live data before a collection (GOGC; a GOGC in the environment replaces this default)")
	}
	fs.Usage = config.Usage(fs, p.Name)
	if err := config.Parse(fs, args, p.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	opts, id := p.Logging()
	log, err := logging.New(p.stderr(), opts, p.Name, id)
	if err != nil {
		return err
	}
	if p.SysmonPoll {
		p.keepSysmonPolling(sysmonPoll, log)
	}
	if p.GCPercent > 0 {
		if err := p.applyGCPercent(fs, gcPercent, log); err != nil {
			return err
		}
	}
	if pprofAddr != nil {
		stopProfiles, err := pprofserve.Start(*pprofAddr, log)
		if err != nil {
			return err
		}
		defer stopProfiles()
	}
	ctx, stop := lifecycle.SignalContext(ctx)
	defer stop()
	s, err := p.Start(ctx, log)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before startup completed", "reason", err)
			return nil
		}
		return err
	}
	return lifecycle.WaitAndStop(ctx, log, s, s.Failed(), lifecycle.DefaultShutdownTimeout)
}

func (p Program[S]) stderr() io.Writer {
	if p.Stderr == nil {
		return os.Stderr
	}
	return p.Stderr
}

const (
	gcPercentFlag  = "gc.percent"
	sysmonPollFlag = "sysmon.poll"
)

// keepSysmonPolling starts the process again with sysmon.Setting in GODEBUG
// unless it is off, already there (this is the restarted process, or the
// operator set a schedtrace), or the program cannot restart (Run called in
// a test). Nothing has started yet: no listener, no file open. A failed
// restart is logged and the process goes on as it is.
func (p Program[S]) keepSysmonPolling(on bool, log *slog.Logger) {
	environ := p.environ
	if environ == nil {
		environ = os.Environ
	}
	env, changed := sysmon.Env(environ())
	switch {
	case !on:
		log.Info("runtime monitor thread may deep-sleep when idle", "flag", "--"+sysmonPollFlag+"=false")
	case !changed && sysmon.Polls(godebugOf(env)):
		log.Info("runtime monitor thread polls", "godebug", godebugOf(env))
	case !changed:
		log.Info("runtime monitor thread may deep-sleep when idle", "godebug", godebugOf(env))
	case p.reexec == nil:
	default:
		log.Info("starting again so that the runtime monitor thread polls", "godebug", godebugOf(env))
		if err := p.reexec(env); err != nil {
			log.Warn("runtime monitor thread may deep-sleep when idle", "err", err)
		}
	}
}

func godebugOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			return v
		}
	}
	return ""
}

// applyGCPercent sets the collector's target: the flag (or its twin) when
// given, else GOGC when the environment has it (the runtime applied it),
// else the program's default. A broker's garbage is mostly request bytes
// it has already written out, and collecting it at Go's default of 100
// took the one core a broker is given for half a millisecond several times
// a second under load.
func (p Program[S]) applyGCPercent(fs *flag.FlagSet, v int, log *slog.Logger) error {
	if v < 1 {
		return &config.Error{Flag: gcPercentFlag, Value: strconv.Itoa(v), Reason: "must be positive (the collector cannot be turned off)"}
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == gcPercentFlag })
	getenv := p.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if env := getenv("GOGC"); env != "" && !given {
		log.Info("garbage collector target from GOGC", "gogc", env)
		return nil
	}
	debug.SetGCPercent(v)
	log.Info("garbage collector target", "gc_percent", v)
	return nil
}

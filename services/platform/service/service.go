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

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/pprofserve"
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
}

// Main runs p with the process's arguments and exits: 0 after -h or a clean
// stop, 1 after any error (printed as "name: error").
func Main[S Running](p Program[S]) {
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

// Command controller runs one tidemark controller process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"tidemark.io/services/controller"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/pprofserve"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := controller.DefaultConfig()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	cfg.AddFlags(fs)
	pprofAddr := pprofserve.AddFlag(fs)
	fs.Usage = config.Usage(fs, "controller")
	if err := config.Parse(fs, args, nil); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	log, err := logging.New(os.Stderr, cfg.Log, "controller", cfg.ID)
	if err != nil {
		return err
	}
	stopProfiles, err := pprofserve.Start(*pprofAddr, log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	ctx, stop := lifecycle.SignalContext(context.Background())
	defer stop()
	b, err := controller.Start(ctx, cfg, log)
	if err != nil {
		if ctx.Err() != nil {
			// Asked to stop while still starting (etcd not reachable yet,
			// say): that is a clean stop, not a failure.
			log.Info("stopped before startup completed", "reason", err)
			return nil
		}
		return err
	}
	return lifecycle.WaitAndStop(ctx, log, b, b.Failed(), lifecycle.DefaultShutdownTimeout)
}

// Command gateway serves tidemark's REST API, OpenAPI document and console.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"tidemark.io/gateway"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := gateway.DefaultOptions()
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	cfg.AddFlags(fs)
	fs.Usage = config.Usage(fs, "gateway")
	if err := config.Parse(fs, args, nil); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	log, err := logging.New(os.Stderr, cfg.Log, "gateway", -1)
	if err != nil {
		return err
	}
	ctx, stop := lifecycle.SignalContext(context.Background())
	defer stop()
	g, err := gateway.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	return lifecycle.WaitAndStop(ctx, log, g, g.Failed(), lifecycle.DefaultShutdownTimeout)
}

// Command controller runs one tidemark controller process.
package main

import (
	"context"
	"log/slog"

	"tidemark.io/services/controller"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/service"
)

func main() {
	cfg := controller.DefaultConfig()
	service.Main(service.Program[*controller.Controller]{
		Name:     "controller",
		Profiles: true,
		AddFlags: cfg.AddFlags,
		Logging:  func() (logging.Options, int32) { return cfg.Log, cfg.ID },
		Start: func(ctx context.Context, log *slog.Logger) (*controller.Controller, error) {
			return controller.Start(ctx, cfg, log)
		},
	})
}

// Command broker runs one tidemark broker.
package main

import (
	"context"
	"log/slog"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/service"
)

func main() {
	cfg := broker.DefaultConfig()
	service.Main(service.Program[*broker.Broker]{
		Name:     "broker",
		Profiles: true,
		AddFlags: cfg.AddFlags,
		Logging:  func() (logging.Options, int32) { return cfg.Log, cfg.ID },
		Start: func(ctx context.Context, log *slog.Logger) (*broker.Broker, error) {
			return broker.Start(ctx, cfg, log)
		},
	})
}

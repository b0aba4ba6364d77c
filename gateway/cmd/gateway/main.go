// Command gateway serves tidemark's REST API, OpenAPI document and console.
package main

import (
	"context"
	"log/slog"

	"tidemark.io/gateway"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/service"
)

func main() {
	cfg := gateway.DefaultOptions()
	service.Main(service.Program[*gateway.Gateway]{
		Name:     "gateway",
		AddFlags: cfg.AddFlags,
		Logging:  func() (logging.Options, int32) { return cfg.Log, -1 },
		Start: func(ctx context.Context, log *slog.Logger) (*gateway.Gateway, error) {
			return gateway.Start(ctx, cfg, log)
		},
	})
}

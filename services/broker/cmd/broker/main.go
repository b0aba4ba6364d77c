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
		// Request bytes already written out are most of a broker's garbage:
		// a larger heap target collects a few times less often for some
		// tens of megabytes (DESIGN, "Garbage collection").
		GCPercent: broker.DefaultGCPercent,
		// Every hop of a synchronous write wakes an idle broker; without
		// this each also woke the runtime's sysmon thread (package sysmon).
		SysmonPoll: true,
		AddFlags:   cfg.AddFlags,
		Logging:    func() (logging.Options, int32) { return cfg.Log, cfg.ID },
		Start: func(ctx context.Context, log *slog.Logger) (*broker.Broker, error) {
			return broker.Start(ctx, cfg, log)
		},
	})
}

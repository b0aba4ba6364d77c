// Package logging builds the slog logger every tidemark service uses, from
// two settings: level and format (text or json).
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"tidemark.io/services/platform/config"
)

// Options selects how a service logs.
type Options struct {
	Level  string // debug, info, warn, error
	Format string // text or json
}

// DefaultOptions logs info and above as text.
func DefaultOptions() Options { return Options{Level: "info", Format: "text"} }

// AddFlags registers --log.level and --log.format.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Level, "log.level", o.Level, "log level: debug, info, warn or error")
	fs.StringVar(&o.Format, "log.format", o.Format, "log format: text or json")
}

// Validate names the log flag that is wrong.
func (o Options) Validate() error {
	if _, err := parseLevel(o.Level); err != nil {
		return config.Invalid("log.level", o.Level, "%v", err)
	}
	switch o.Format {
	case "text", "json":
	default:
		return config.Invalid("log.format", o.Format, "must be text or json")
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("must be debug, info, warn or error")
}

// New builds a logger writing to w, tagged with the service name and node id
// so that interleaved logs of a dev cluster stay readable.
func New(w io.Writer, o Options, service string, nodeID int32) (*slog.Logger, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	lvl, _ := parseLevel(o.Level)
	ho := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if o.Format == "json" {
		h = slog.NewJSONHandler(w, ho)
	} else {
		h = slog.NewTextHandler(w, ho)
	}
	l := slog.New(h).With("service", service)
	if nodeID >= 0 {
		l = l.With("node", nodeID)
	}
	return l, nil
}

// Discard is a logger that drops everything, for components given no logger.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// OrDiscard returns l, or a discarding logger when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return Discard()
	}
	return l
}

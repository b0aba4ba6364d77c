package embedded

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog returns a zap logger that forwards every record etcd writes to l,
// so etcd's logs land wherever the rest of tidemark logs. A nil l gives a
// logger that drops everything.
func zapToSlog(l *slog.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{l: l})
}

// slogCore is a zapcore.Core writing to a slog.Logger. The slog handler's
// level decides what is kept.
type slogCore struct {
	l      *slog.Logger
	fields []zapcore.Field
}

func (c *slogCore) Enabled(lvl zapcore.Level) bool {
	return c.l.Enabled(context.Background(), slogLevel(lvl))
}

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{l: c.l, fields: append(slices.Clip(c.fields), fs...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	c.l.LogAttrs(context.Background(), slogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

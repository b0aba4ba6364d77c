// Package pprofserve serves Go's runtime profiles (net/http/pprof) on an
// opt-in listener of its own, so a running broker or controller can be
// profiled under load. The endpoints are unauthenticated: the listener is
// off by default and may only bind a loopback address.
package pprofserve

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"tidemark.io/services/platform/config"
)

// FlagName is the flag that turns the listener on.
const FlagName = "pprof.listen"

// AddFlag registers --pprof.listen on fs and returns where its value lands.
func AddFlag(fs *flag.FlagSet) *string {
	return fs.String(FlagName, "", "serve /debug/pprof/ on this loopback address, e.g. 127.0.0.1:6060 (off when empty; unauthenticated, so loopback only)")
}

// Start listens on addr and serves the profiles until stop is called; an
// empty addr does nothing.
func Start(addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, config.Invalid(FlagName, addr, "want host:port: %v", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, config.Invalid(FlagName, addr, "the profiles are unauthenticated: bind a loopback address (127.0.0.1 or ::1)")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagName, err)
	}
	return Serve(l, log), nil
}

// Serve serves the profiles on l, already bound, until stop is called
// (which closes l). The caller checked that l is a loopback listener.
func Serve(l net.Listener, log *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "err", err)
		}
	}()
	log.Info("serving profiles", "addr", l.Addr().String())
	return func() { _ = srv.Close() }
}

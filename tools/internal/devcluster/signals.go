package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// ShutdownSignals end the launcher with a graceful shutdown: Ctrl-C,
// SIGTERM, and SIGHUP, which a closed terminal sends (by default it would
// end the launcher at once and its nodes by the parent-death SIGKILL).
var ShutdownSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// watched is ShutdownSignals less SIGHUP when it is ignored (nohup): a
// launcher meant to outlive its terminal keeps doing so.
func watched() []os.Signal {
	var out []os.Signal
	for _, s := range ShutdownSignals {
		if s == syscall.SIGHUP && signal.Ignored(s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// NotifyShutdown returns a context that ends with parent or at the first
// of ShutdownSignals, and a channel closed at the second one, when it says
// so on out: Down then stops waiting for graceful stops and kills the
// nodes left (Cluster.Hurry), as a second Ctrl-C does to many servers.
// stop ends the watch; a signal after it has its default effect.
func NotifyShutdown(parent context.Context, out io.Writer) (ctx context.Context, hurry <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, len(ShutdownSignals))
	signal.Notify(sigs, watched()...)
	ctx, cancel := context.WithCancel(parent)
	h := make(chan struct{})
	done := make(chan struct{})
	go func() {
		// Every signal counts once here: the first one (which may also end
		// parent, the CLI's own Ctrl-C watch) begins the shutdown.
		first := true
		for {
			select {
			case s := <-sigs:
				if first {
					first = false
					cancel()
					continue
				}
				fmt.Fprintf(out, "\nsecond signal (%v): killing the nodes without waiting for their graceful stop\n", s)
				close(h)
				return
			case <-done:
				return
			}
		}
	}()
	return ctx, h, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// DownOr is Down that kills the nodes left once hurry is closed.
func (c *Cluster) DownOr(out io.Writer, hurry <-chan struct{}) {
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-hurry:
			c.Hurry()
		case <-finished:
		}
	}()
	c.Down(out)
}

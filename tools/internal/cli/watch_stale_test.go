package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// A watch whose controllers all stop keeps trying, and says that the table
// it last printed is stale instead of passing it off as current.
func TestWatchSaysWhenTheControllersStopAnswering(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	rendered := make(chan struct{})
	out := &cancelOnWrite{look: "tidemark watch", cancel: func() { close(rendered) }}
	errw := &cancelOnWrite{look: "the table is stale", cancel: cancel}
	code := make(chan int, 1)
	go func() {
		code <- cli.Run(ctx, append([]string{"watch", "--interval", "200ms", "--color", "never"}, c.flags...),
			cli.Streams{In: strings.NewReader(""), Out: out, Err: errw, Getenv: func(string) string { return "" }})
	}()
	select {
	case <-rendered:
	case got := <-code:
		t.Fatalf("watch ended (exit %d) before its first table:\n%s", got, errw.String())
	}
	c.StopController(1)
	c.StopController(2)
	if got := <-code; got != cli.ExitOK || !errw.fired {
		t.Fatalf("exit %d, stderr %q: want a word that the table is stale, then exit 0 on the interrupt", got, errw.String())
	}
	contains(t, errw.String(), "no update from the controllers since")
}

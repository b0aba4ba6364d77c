package benchcmp

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// placementSettle bounds how long a stream's creation is retried while the
// cluster refuses it for want of peers.
const placementSettle = 30 * time.Second

// placementRefused reports whether a stream's creation failed only because
// the meta leader has not yet heard every server's statistics: JetStream
// answers "no suitable peers for placement, peer offline" (err_code 10005)
// on a cluster a few seconds old or right after its meta leader changed,
// though all three servers are up and /healthz is ok. nats bench reports it
// as "could not create the stream" (the creation may also time out then).
// A stream just created may also have no leader yet: its first publish then
// meets no responder, which nats bench reports as "no response from stream"
// (seen in CI on a stream 1 s old); the run is measured again from the start.
func placementRefused(msg string) bool {
	return strings.Contains(msg, "no suitable peers for placement") ||
		strings.Contains(msg, "err_code=10005") ||
		strings.Contains(msg, "could not create the stream") ||
		strings.Contains(msg, "no response from stream")
}

// createWhilePlacementSettles calls create until it succeeds, fails for
// another reason, ctx ends or placementSettle has passed; every refused
// attempt is written to log, so a run that waited says so.
func createWhilePlacementSettles(ctx context.Context, log io.Writer, what string, create func() error) error {
	deadline := time.Now().Add(placementSettle)
	for attempt := 1; ; attempt++ {
		err := create()
		if err == nil || !placementRefused(err.Error()) || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(log, "%s: attempt %d refused (%v); retrying while the cluster settles\n", what, attempt, err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

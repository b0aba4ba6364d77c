package gateway

import (
	"context"
	"sync"

	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/services/platform/kerr"
)

// streamSlots bounds the streams (records:follow, cluster:watch, the
// console's event streams through console.Options.Streams) open
// at once, per user and in all: each holds a goroutine, an upstream stream
// and a share of a connection for as long as its caller keeps it open, so
// one caller could otherwise hold them without bound. Callers without
// authentication share one user.
type streamSlots struct {
	perUser, total int

	mu   sync.Mutex
	open map[string]int
	n    int
}

func newStreamSlots(perUser, total int) *streamSlots {
	return &streamSlots{perUser: perUser, total: total, open: map[string]int{}}
}

// acquire takes a slot for a stream living as long as ctx (the request's),
// or refuses with THROTTLING_QUOTA_EXCEEDED (429, retriable).
func (s *streamSlots) acquire(ctx context.Context, what string) error {
	user, _ := restauth.UserFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n >= s.total {
		return kerr.BadField(kerr.ThrottlingQuotaExceeded, "streams",
			"%s: the gateway has %d streams open, its limit (--http.max.streams): close one and try again", what, s.n)
	}
	if s.open[user] >= s.perUser {
		return kerr.BadField(kerr.ThrottlingQuotaExceeded, "streams",
			"%s: %d streams of this caller are open, the limit per user (--http.max.streams.per.user): close one and try again", what, s.open[user])
	}
	s.open[user]++
	s.n++
	markStream(ctx)
	context.AfterFunc(ctx, func() { s.release(user) })
	return nil
}

func (s *streamSlots) release(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	if s.open[user]--; s.open[user] <= 0 {
		delete(s.open, user)
	}
}

// openCount is the number of streams open now, for the metrics.
func (s *streamSlots) openCount() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.n)
}

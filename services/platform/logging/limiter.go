package logging

import (
	"sync"
	"time"
)

// limiterKeys bounds the keys a Limiter remembers: a client cycling
// addresses or names cannot grow it without bound.
const limiterKeys = 4096

// Limiter spaces log lines a client can cause (one a refused connection,
// say): one line per key per interval, the lines held back in between
// counted for the next one to name. Metrics still count every event.
type Limiter struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	last  map[string]*limited
}

type limited struct {
	at       time.Time
	unlogged int
}

// NewLimiter lets one line per key through every interval.
func NewLimiter(every time.Duration) *Limiter {
	return &Limiter{every: every, now: time.Now, last: map[string]*limited{}}
}

// Allow reports whether a line for key may be logged now and, if so, how
// many were held back since the last one.
func (l *Limiter) Allow(key string) (unlogged int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e := l.last[key]
	if e != nil && now.Sub(e.at) < l.every {
		e.unlogged++
		return 0, false
	}
	if e == nil {
		if len(l.last) >= limiterKeys {
			clear(l.last)
		}
		e = &limited{}
		l.last[key] = e
	}
	n := e.unlogged
	e.at, e.unlogged = now, 0
	return n, true
}

package restauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// maxSessions bounds the sessions kept in memory; past it the one closest
// to expiry is dropped.
const maxSessions = 10000

// maxSessionsPerToken bounds one token's sessions; past it that token's
// own session closest to expiry is dropped. Without it one token's holder
// logging in maxSessions times ended every other user's session.
const maxSessionsPerToken = 64

// sessions are the console's logins: a random id in an HttpOnly cookie
// stands for the token it was opened with, until it expires. Only the id's
// digest is kept. A session ends early when its token leaves the tokens
// file.
type sessions struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex // guards byID
	byID map[digest]session
}

type session struct {
	token   digest // the token it was opened with
	user    string
	expires time.Time
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, now: time.Now, byID: map[digest]session{}}
}

// open starts a session and returns its id and expiry.
func (s *sessions) open(token digest, user string) (string, time.Time) {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // crypto/rand does not fail on supported systems
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.now()
	exp := now.Add(s.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now, token)
	s.byID[sha256.Sum256([]byte(id))] = session{token: token, user: user, expires: exp}
	return id, exp
}

// get returns the live session with id.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[key]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(ss.expires) {
		delete(s.byID, key)
		return session{}, false
	}
	return ss, true
}

func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sha256.Sum256([]byte(id)))
}

// pruneLocked makes room for one more session of token: it drops expired
// sessions, then token's own nearest expiry if it has maxSessionsPerToken,
// then, if all are still too many, the one nearest expiry.
func (s *sessions) pruneLocked(now time.Time, token digest) {
	var oldest, oldestOwn oldestSession
	own := 0
	for k, ss := range s.byID {
		if !now.Before(ss.expires) {
			delete(s.byID, k)
			continue
		}
		oldest.consider(k, ss)
		if ss.token == token {
			own++
			oldestOwn.consider(k, ss)
		}
	}
	if own >= maxSessionsPerToken {
		delete(s.byID, oldestOwn.id)
	}
	if len(s.byID) >= maxSessions {
		delete(s.byID, oldest.id)
	}
}

// oldestSession finds the session nearest expiry among those considered.
type oldestSession struct {
	id      digest
	expires time.Time
}

func (o *oldestSession) consider(id digest, ss session) {
	if o.expires.IsZero() || ss.expires.Before(o.expires) {
		o.id, o.expires = id, ss.expires
	}
}

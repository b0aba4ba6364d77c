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
	if len(s.byID) >= maxSessions {
		s.pruneLocked(now)
	}
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

// pruneLocked drops expired sessions, and the one nearest expiry if that
// freed nothing.
func (s *sessions) pruneLocked(now time.Time) {
	var oldest digest
	var oldestExp time.Time
	for k, ss := range s.byID {
		if !now.Before(ss.expires) {
			delete(s.byID, k)
			continue
		}
		if oldestExp.IsZero() || ss.expires.Before(oldestExp) {
			oldest, oldestExp = k, ss.expires
		}
	}
	if len(s.byID) >= maxSessions {
		delete(s.byID, oldest)
	}
}

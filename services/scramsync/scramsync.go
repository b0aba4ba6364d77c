// Package scramsync keeps a broker's copy of users' SCRAM credentials
// equal to those in etcd (<p>/config/users/), followed with
// services/etcdfollow: its SASL listeners log clients in against it, so a
// user created, changed or deleted through the active controller counts
// from the next login on, whatever the broker missed from the controller.
package scramsync

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"tidemark.io/services/etcdfollow"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/scram"
)

// DefaultLoadWait bounds how long a login waits for the first load, as the
// authorizer waits for the ACL bindings.
const DefaultLoadWait = 5 * time.Second

// Users are the users' credentials in force.
type Users struct {
	log      *slog.Logger
	loadWait time.Duration
	loaded   chan struct{}
	once     sync.Once
	held     atomic.Pointer[map[string]metastore.UserCredentials]
}

// New holds no user until Run's first load; a login waits for it at most
// loadWait (0: DefaultLoadWait).
func New(log *slog.Logger, loadWait time.Duration) *Users {
	if loadWait <= 0 {
		loadWait = DefaultLoadWait
	}
	return &Users{log: log, loadWait: loadWait, loaded: make(chan struct{})}
}

// Run follows the credentials in etcd until ctx ends. m (nil: none)
// exports how current they are, as state "users".
func (u *Users) Run(ctx context.Context, store *metastore.Store, m *etcdfollow.Metrics) {
	etcdfollow.Run(ctx, store, etcdfollow.Prefix[string, metastore.UserCredentials]{
		What:    "users' SCRAM credentials",
		Prefix:  store.UsersPrefix(),
		Key:     store.UserOf,
		Value:   store.DecodeUserCredentials,
		Set:     func(held map[string]metastore.UserCredentials) { u.held.Store(&held) },
		State:   "users",
		Metrics: m,
	}, u.log, func() { u.once.Do(func() { close(u.loaded) }) })
}

// Lookup is user's credential for mech (a scram.Lookup). Before the first
// load it waits for it; a load that does not come in time fails the login
// as a failed authentication, and says why in the log.
func (u *Users) Lookup(user, mech string) (scram.Credential, bool) {
	select {
	case <-u.loaded:
	default:
		t := time.NewTimer(u.loadWait)
		defer t.Stop()
		select {
		case <-u.loaded:
		case <-t.C:
			u.log.Warn("SASL login refused: the users' SCRAM credentials are not loaded from etcd yet",
				"user", user, "mechanism", mech, "waited", u.loadWait)
			return scram.Credential{}, false
		}
	}
	cr, ok := (*u.held.Load())[user][mech]
	return cr, ok
}

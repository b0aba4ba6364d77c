// Package aclsync keeps an authorizer's stored ACL bindings equal to those
// in etcd (<p>/acls/), followed with services/etcdfollow, so a binding
// created or deleted through the active controller takes effect on every
// broker and controller, active or standby, without a restart.
package aclsync

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"tidemark.io/services/etcdfollow"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/authz"
)

// Target is what receives the bindings in force.
type Target interface {
	SetStored(*authz.ACL)
}

// Run follows the bindings until ctx ends. Until the first load succeeds
// the target has none, and an authorizer told to expect them
// (authz.Options.StoredBindings) holds users' requests until it does, so
// a stored deny is never missed while a process starts. m (nil: none)
// exports how current the bindings are, as state "acls".
func Run(ctx context.Context, store *metastore.Store, to Target, m *etcdfollow.Metrics, log *slog.Logger) {
	warned := map[authz.Binding]bool{} // invalid bindings already logged
	etcdfollow.Run(ctx, store, etcdfollow.Prefix[string, authz.Binding]{
		What:   "ACL bindings",
		Prefix: store.ACLsPrefix(),
		Key:    func(key string) (string, bool) { return key, true },
		Value:  store.DecodeACL,
		Set: func(held map[string]authz.Binding) {
			to.SetStored(authz.RulesOf(slices.Collect(maps.Values(held)), func(b authz.Binding, err error) {
				if !warned[b] {
					warned[b] = true
					log.Error("ignoring an ACL binding in etcd that is not valid; it grants and denies nothing", "binding", b.String(), "err", err.Error())
				}
			}))
		},
		State:   "acls",
		Metrics: m,
	}, log, nil)
}

// Package aclsync keeps an authorizer's stored ACL bindings equal to those
// in etcd (<p>/acls/): it loads them, then follows every change, so a
// binding created or deleted through the active controller takes effect on
// every broker and controller, active or standby, without a restart.
package aclsync

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/authz"
)

// retryEvery is the pause before loading again after a failed load or a
// watch that ended (etcd away, history compacted).
const retryEvery = time.Second

// Target is what receives the bindings in force.
type Target interface {
	SetStored(*authz.ACL)
}

// Run follows the bindings until ctx ends. Until the first load succeeds
// the target has none, and an authorizer told to expect them
// (authz.Options.StoredBindings) holds users' requests until it does, so
// a stored deny is never missed while a process starts.
func Run(ctx context.Context, store *metastore.Store, to Target, log *slog.Logger) {
	for ctx.Err() == nil {
		err := follow(ctx, store, to, log)
		if ctx.Err() != nil {
			return
		}
		log.Warn("ACL bindings: following etcd failed; loading again", "err", err, "in", retryEvery)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}

func follow(ctx context.Context, store *metastore.Store, to Target, log *slog.Logger) error {
	stored, rev, err := store.ACLs(ctx)
	if err != nil {
		return err
	}
	held := make(map[string]authz.Binding, len(stored))
	for _, s := range stored {
		held[s.Key] = s.Binding
	}
	warned := map[authz.Binding]bool{} // invalid bindings already logged
	publish(held, to, warned, log)
	log.Info("ACL bindings loaded from etcd", "bindings", len(held), "revision", rev)
	for wr := range store.WatchACLs(ctx, rev+1) {
		if wr.Err != nil {
			return wr.Err
		}
		for _, ev := range wr.Events {
			if ev.Type == metastore.EventDelete {
				delete(held, ev.Key)
				continue
			}
			b, ok := store.DecodeACL(ev.Key, ev.Raw)
			if !ok {
				delete(held, ev.Key) // what the key held before is gone too
				continue
			}
			held[ev.Key] = b
		}
		publish(held, to, warned, log)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("the watch ended")
}

// publish hands the held bindings to the target; an invalid one is logged
// once, not at every change after it.
func publish(held map[string]authz.Binding, to Target, warned map[authz.Binding]bool, log *slog.Logger) {
	bs := make([]authz.Binding, 0, len(held))
	for _, b := range held {
		bs = append(bs, b)
	}
	to.SetStored(authz.RulesOf(bs, func(b authz.Binding, err error) {
		if !warned[b] {
			warned[b] = true
			log.Error("ignoring an ACL binding in etcd that is not valid; it grants and denies nothing", "binding", b.String(), "err", err.Error())
		}
	}))
}

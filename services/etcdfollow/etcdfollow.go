// Package etcdfollow keeps a process's copy of state that only the active
// controller writes to etcd (ACL bindings, client quota entities, users'
// SCRAM credentials): it loads the prefix at one revision, watches from the
// next, and hands the whole decoded set to its target after the load and
// after each change. A watch that fails (etcd away, history compacted) is
// followed, after a pause, by a full load, never by a guess. Metrics tell
// an operator how current each copy is and how often it had to reload.
package etcdfollow

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"time"

	"tidemark.io/services/metastore"
)

// retryEvery is the pause before loading again after a failed load or a
// watch that ended.
const retryEvery = time.Second

// loadTimeout bounds one load: etcd's client waits for a connection as
// long as its context lets it, so with etcd away a load without a bound
// neither failed nor counted a reload, and the follower looked current.
var loadTimeout = 10 * time.Second

// Prefix is what is followed and how it decodes.
type Prefix[K comparable, V any] struct {
	// What names the state in logs ("ACL bindings").
	What string
	// Prefix is the etcd prefix (one of the metastore.Store's *Prefix).
	Prefix string
	// Key is what a key under the prefix names; false: nothing is held
	// under it.
	Key func(key string) (K, bool)
	// Value decodes a stored value; false: it does not decode (Value logs
	// why) and its key holds nothing, not even what it held before.
	Value func(key string, raw []byte) (V, bool)
	// Set receives the whole set after the first load and every change
	// or reload; the map is its own.
	Set func(map[K]V)
	// State labels the metrics ("acls"); Metrics nil: none are exported.
	State   string
	Metrics *Metrics
}

// Run follows p until ctx ends. loaded (nil: none) is called once, after
// the first load was handed to Set: a process that must not act on an
// empty set waits for it.
func Run[K comparable, V any](ctx context.Context, store *metastore.Store, p Prefix[K, V], log *slog.Logger, loaded func()) {
	m := p.Metrics.of(p.State)
	for ctx.Err() == nil {
		err := follow(ctx, store, p, m, log, &loaded)
		if ctx.Err() != nil {
			return
		}
		log.Warn(p.What+": following etcd failed; loading again", "err", err, "in", retryEvery)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
		m.reloading()
	}
}

func follow[K comparable, V any](ctx context.Context, store *metastore.Store, p Prefix[K, V], m stateMetrics, log *slog.Logger, loaded *func()) error {
	lctx, cancel := context.WithTimeout(ctx, loadTimeout)
	kvs, rev, err := store.ReadPrefix(lctx, p.Prefix)
	cancel()
	if err != nil {
		return err
	}
	held := make(map[K]V, len(kvs))
	for _, kv := range kvs {
		p.put(held, string(kv.Key), kv.Value)
	}
	p.Set(maps.Clone(held))
	m.applied(len(held))
	if *loaded != nil {
		(*loaded)()
		*loaded = nil
	}
	log.Info(p.What+" loaded from etcd", "count", len(held), "revision", rev)
	for wr := range store.WatchPrefix(ctx, p.Prefix, rev+1) {
		if wr.Err != nil {
			return wr.Err
		}
		for _, ev := range wr.Events {
			if ev.Type != metastore.EventDelete {
				p.put(held, ev.Key, ev.Raw)
			} else if k, ok := p.Key(ev.Key); ok {
				delete(held, k)
			}
		}
		p.Set(maps.Clone(held))
		m.applied(len(held))
		log.Info(p.What+" changed in etcd", "changes", len(wr.Events), "count", len(held), "revision", wr.Revision)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("the watch ended")
}

// put holds what key now stores.
func (p Prefix[K, V]) put(held map[K]V, key string, raw []byte) {
	v, valid := p.Value(key, raw)
	k, ok := p.Key(key)
	switch {
	case !ok:
	case valid:
		held[k] = v
	default:
		delete(held, k)
	}
}

// Package quotasync keeps a broker's client quota entities equal to those
// in etcd (<p>/quotas/): it loads them, then follows every change, so an
// entity altered through the active controller takes effect on every
// broker without a restart. A watch that fails (etcd away, history
// compacted) is followed by a full load, never by a guess.
package quotasync

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"tidemark.io/services/metastore"
)

// retryEvery is the pause before loading again after a failed load or a
// watch that ended.
const retryEvery = time.Second

// Entities are the quota entities in force, by entity.
type Entities = map[metastore.QuotaEntity]metastore.ClientQuotaValues

// Target is what receives the entities in force: the whole set, each time.
type Target interface {
	SetEntities(Entities)
}

// Run follows the entities until ctx ends. loaded (nil: none) is called
// once, after the first full load was handed to the target: a broker
// waits for it before it registers, so it never serves a client under the
// static quotas alone and then, a moment later, under its entity.
func Run(ctx context.Context, store *metastore.Store, to Target, log *slog.Logger, loaded func()) {
	var once sync.Once
	first := func() {
		if loaded != nil {
			once.Do(loaded)
		}
	}
	for ctx.Err() == nil {
		err := follow(ctx, store, to, log, first)
		if ctx.Err() != nil {
			return
		}
		log.Warn("client quotas: following etcd failed; loading again", "err", err, "in", retryEvery)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}

func follow(ctx context.Context, store *metastore.Store, to Target, log *slog.Logger, loaded func()) error {
	stored, rev, err := store.ClientQuotas(ctx)
	if err != nil {
		return err
	}
	held := make(Entities, len(stored))
	for _, q := range stored {
		held[q.Entity] = q.Values
	}
	to.SetEntities(maps.Clone(held))
	loaded()
	log.Info("client quota entities loaded from etcd", "entities", len(held), "revision", rev)
	for wr := range store.WatchClientQuotas(ctx, rev+1) {
		if wr.Err != nil {
			return wr.Err
		}
		for _, ev := range wr.Events {
			e, ok := store.ClientQuotaEntityOf(ev.Key)
			if !ok {
				continue // no entity's key: nothing held under it
			}
			if ev.Type == metastore.EventDelete {
				delete(held, e)
				continue
			}
			q, ok := store.DecodeClientQuota(ev.Key, ev.Raw)
			if !ok {
				delete(held, e) // what the key held before is gone too
				continue
			}
			held[e] = q.Values
			log.Info("client quota entity changed", "entity", e.String(), "quotas", q.Values)
		}
		to.SetEntities(maps.Clone(held))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("the watch ended")
}

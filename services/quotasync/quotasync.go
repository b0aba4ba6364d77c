// Package quotasync keeps a broker's client quota entities equal to those
// in etcd (<p>/quotas/), followed with services/etcdfollow, so an entity
// altered through the active controller takes effect on every broker
// without a restart.
package quotasync

import (
	"context"
	"log/slog"

	"tidemark.io/services/etcdfollow"
	"tidemark.io/services/metastore"
)

// Entities are the quota entities in force, by entity.
type Entities = map[metastore.QuotaEntity]metastore.ClientQuotaValues

// Target is what receives the entities in force: the whole set, each time.
type Target interface {
	SetEntities(Entities)
}

// Run follows the entities until ctx ends. loaded (nil: none) is called
// once, after the first full load was handed to the target: a broker
// waits for it before it registers, so it never serves a client under the
// static quotas alone and then, a moment later, under its entity. m (nil:
// none) exports how current the entities are, as state "quotas".
func Run(ctx context.Context, store *metastore.Store, to Target, m *etcdfollow.Metrics, log *slog.Logger, loaded func()) {
	etcdfollow.Run(ctx, store, etcdfollow.Prefix[metastore.QuotaEntity, metastore.ClientQuotaValues]{
		What:   "client quota entities",
		Prefix: store.ClientQuotasPrefix(),
		Key:    store.ClientQuotaEntityOf,
		Value: func(key string, raw []byte) (metastore.ClientQuotaValues, bool) {
			q, ok := store.DecodeClientQuota(key, raw)
			return q.Values, ok
		},
		Set:     to.SetEntities,
		State:   "quotas",
		Metrics: m,
	}, log, loaded)
}

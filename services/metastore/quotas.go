package metastore

import (
	"context"
	"log/slog"
	"net/url"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Client quota entities live one a key under <p>/quotas/, laid out as
// Kafka's ZooKeeper mode lays out /config/users and /config/clients:
//
//	<p>/quotas/users/<user>
//	<p>/quotas/users/<user>/clients/<client-id>
//	<p>/quotas/clients/<client-id>
//
// each name path-escaped, the default entity spelled <default> (a name
// that is literally "<default>" is escaped to %3Cdefault%3E, so the two
// never meet). They are not under <p>/config/users/, which holds users'
// SCRAM credentials. A value is a JSON object of the quota keys set
// ({"producer_byte_rate":1048576}); an entity with none is no key. Only the
// active controller writes them (fenced); every broker watches the prefix
// (services/quotasync).

// QuotaDefault spells the default entity of a type in keys and listings.
const QuotaDefault = "<default>"

// QuotaEntity names a client quota entity: a user, a client id, or both.
// A part is absent when its name is "" and its Default flag is false.
type QuotaEntity struct {
	User, ClientID               string
	DefaultUser, DefaultClientID bool
}

// HasUser says whether the entity has a user part.
func (e QuotaEntity) HasUser() bool { return e.User != "" || e.DefaultUser }

// HasClientID says whether the entity has a client-id part.
func (e QuotaEntity) HasClientID() bool { return e.ClientID != "" || e.DefaultClientID }

// String is the entity as Kafka's tools print it: user=alice,client-id=<default>.
func (e QuotaEntity) String() string {
	var parts []string
	if e.HasUser() {
		parts = append(parts, "user="+quotaName(e.User, e.DefaultUser))
	}
	if e.HasClientID() {
		parts = append(parts, "client-id="+quotaName(e.ClientID, e.DefaultClientID))
	}
	return strings.Join(parts, ",")
}

func quotaName(name string, def bool) string {
	if def {
		return QuotaDefault
	}
	return name
}

func quotaSegment(name string, def bool) string {
	if def {
		return QuotaDefault
	}
	return url.PathEscape(name)
}

// ClientQuotaValues are an entity's quota keys and their values.
type ClientQuotaValues map[string]float64

// StoredClientQuota is one entity as etcd holds it.
type StoredClientQuota struct {
	Entity QuotaEntity
	Values ClientQuotaValues
}

// ClientQuotasPrefix is the prefix under which the entities are kept.
func (s *Store) ClientQuotasPrefix() string { return s.k.quotasDir() }

// ClientQuotas reads every entity at one revision. A key or value that does
// not decode is logged and left out: it limits nobody.
func (s *Store) ClientQuotas(ctx context.Context) ([]StoredClientQuota, int64, error) {
	kvs, rev, err := s.scan(ctx, s.k.quotasDir(), 0)
	if err != nil {
		return nil, 0, err
	}
	out := make([]StoredClientQuota, 0, len(kvs))
	for _, kv := range kvs {
		if q, ok := s.DecodeClientQuota(string(kv.Key), kv.Value); ok {
			out = append(out, q)
		}
	}
	return out, rev, nil
}

// ClientQuotaEntityOf is the entity a key under the prefix names.
func (s *Store) ClientQuotaEntityOf(key string) (QuotaEntity, bool) {
	ki := s.k.parse(key)
	return ki.Quota, ki.Kind == KindClientQuota
}

// DecodeClientQuota decodes one stored entity; one that does not decode is
// logged and reported not ok.
func (s *Store) DecodeClientQuota(key string, raw []byte) (StoredClientQuota, bool) {
	e, ok := s.ClientQuotaEntityOf(key)
	if !ok {
		s.log.Warn("ignoring a key under the client quotas prefix that names no entity", slog.String("key", key))
		return StoredClientQuota{}, false
	}
	v, err := decode[ClientQuotaValues](key, raw)
	if err != nil {
		s.log.Warn("ignoring a client quota entity that does not decode", slog.String("key", key), slog.String("err", err.Error()))
		return StoredClientQuota{}, false
	}
	return StoredClientQuota{Entity: e, Values: v}, true
}

// PutClientQuotas replaces entities' values in fenced transactions; an
// entity with no values is deleted. The caller validated the entities.
func (s *Session) PutClientQuotas(ctx context.Context, qs []StoredClientQuota) error {
	ops := make([]clientv3.Op, 0, len(qs))
	for _, q := range qs {
		key := s.s.k.clientQuota(q.Entity)
		if len(q.Values) == 0 {
			ops = append(ops, clientv3.OpDelete(key))
		} else {
			ops = append(ops, clientv3.OpPut(key, encode(q.Values)))
		}
	}
	return s.commitChunks(ctx, ops)
}

func (k keys) quotasDir() string { return k.p + "/quotas/" }

func (k keys) clientQuota(e QuotaEntity) string {
	key := k.quotasDir()
	if e.HasUser() {
		key += "users/" + quotaSegment(e.User, e.DefaultUser)
		if e.HasClientID() {
			key += "/"
		}
	}
	if e.HasClientID() {
		key += "clients/" + quotaSegment(e.ClientID, e.DefaultClientID)
	}
	return key
}

// parseQuota reads the parts after "quotas/".
func parseQuota(parts []string) (QuotaEntity, bool) {
	var e QuotaEntity
	name := func(seg string) (string, bool, bool) {
		if seg == QuotaDefault {
			return "", true, true
		}
		n, err := url.PathUnescape(seg)
		if err != nil || n == "" || url.PathEscape(n) != seg {
			return "", false, false
		}
		return n, false, true
	}
	var ok bool
	switch {
	case len(parts) == 2 && parts[0] == "users":
		e.User, e.DefaultUser, ok = name(parts[1])
	case len(parts) == 2 && parts[0] == "clients":
		e.ClientID, e.DefaultClientID, ok = name(parts[1])
	case len(parts) == 4 && parts[0] == "users" && parts[2] == "clients":
		if e.User, e.DefaultUser, ok = name(parts[1]); ok {
			e.ClientID, e.DefaultClientID, ok = name(parts[3])
		}
	}
	return e, ok
}

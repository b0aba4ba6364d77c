package quota

import (
	"maps"

	"tidemark.io/services/metastore"
)

// The quota keys of a client quota entity this package enforces.
const (
	ProducerByteRate = "producer_byte_rate"
	ConsumerByteRate = "consumer_byte_rate"
)

// configKey is the entity quota key that limits kind.
func (k Kind) configKey() string {
	if k == Produce {
		return ProducerByteRate
	}
	return ConsumerByteRate
}

// Client is who a request's bytes count against: its authenticated
// principal (TLS CN, SASL user or ANONYMOUS) and the client id it sent
// (the Kafka request header's; "" for gRPC callers, which carry none).
type Client struct {
	Principal, ClientID string
}

// SetEntities replaces the client quota entities in force (the whole set
// etcd holds). Rates already measured are kept: a client whose quota
// changes keeps its measured rate under the new one, as in Kafka.
func (m *Manager) SetEntities(es map[metastore.QuotaEntity]metastore.ClientQuotaValues) {
	es = maps.Clone(es)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entities = es
}

// level is one place Kafka looks for a client's quota, in its order.
type level struct {
	entity metastore.QuotaEntity
	// Which of the client's names the rate is measured on: every client
	// matching an entity shares one rate, kept per user for a user quota
	// and per client id for a client-id quota (Kafka's metric tags).
	byUser, byClient bool
}

// levels are Kafka's eight, most specific first:
//
//  1. /config/users/<user>/clients/<client-id>
//  2. /config/users/<user>/clients/<default>
//  3. /config/users/<user>
//  4. /config/users/<default>/clients/<client-id>
//  5. /config/users/<default>/clients/<default>
//  6. /config/users/<default>
//  7. /config/clients/<client-id>
//  8. /config/clients/<default>
//
// A client without a client id ("", a gRPC caller) is matched, as in
// Kafka, by the user-only levels alone (3 and 6).
func levels(who Client) [8]level {
	u, c := who.Principal, who.ClientID
	return [8]level{
		{metastore.QuotaEntity{User: u, ClientID: c}, true, true},
		{metastore.QuotaEntity{User: u, DefaultClientID: true}, true, true},
		{metastore.QuotaEntity{User: u}, true, false},
		{metastore.QuotaEntity{DefaultUser: true, ClientID: c}, true, true},
		{metastore.QuotaEntity{DefaultUser: true, DefaultClientID: true}, true, true},
		{metastore.QuotaEntity{DefaultUser: true}, true, false},
		{metastore.QuotaEntity{ClientID: c}, false, true},
		{metastore.QuotaEntity{DefaultClientID: true}, false, true},
	}
}

// resolveLocked is the client's kind limit (bytes/s; Unlimited for none)
// and the rate it is measured on: the first entity in Kafka's order that
// sets kind's key, else the static settings c, measured per principal.
func (m *Manager) resolveLocked(kind Kind, c Config, who Client) (float64, key) {
	if len(m.entities) > 0 {
		ck := kind.configKey()
		for _, l := range levels(who) {
			if who.Principal == "" && l.byUser && !l.entity.DefaultUser || who.ClientID == "" && l.byClient {
				continue // the entity would name nobody: it is not this client's
			}
			v, ok := m.entities[l.entity][ck]
			if !ok {
				continue
			}
			k := key{kind: kind}
			if l.byUser {
				k.user = who.Principal
			}
			if l.byClient {
				k.client = who.ClientID
			}
			return v, k
		}
	}
	return float64(m.staticLimitLocked(c, who.Principal)), key{kind: kind, user: who.Principal}
}

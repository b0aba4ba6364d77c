package metastore

import (
	"context"
	"encoding/json"
)

// Entry is one key in a Dump.
type Entry struct {
	Key  string `json:"key"`
	Kind Kind   `json:"kind"`
	// Value is the stored JSON; a value that is not JSON appears as a string.
	Value          json.RawMessage `json:"value"`
	CreateRevision int64           `json:"create_revision"`
	ModRevision    int64           `json:"mod_revision"`
	Version        int64           `json:"version"`
	Lease          int64           `json:"lease,omitempty"`
}

// Snapshot is every key under the prefix at one revision.
type Snapshot struct {
	Prefix   string  `json:"prefix"`
	Revision int64   `json:"revision"`
	Entries  []Entry `json:"entries"`
}

// Dump returns every key under the prefix, in key order, read at one
// revision, for `tidemark metadata dump`. For a broker key the broker epoch
// is the entry's CreateRevision.
func (s *Store) Dump(ctx context.Context) (Snapshot, error) {
	kvs, rev, err := s.scan(ctx, s.k.all(), 0)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Prefix: s.k.p, Revision: rev, Entries: make([]Entry, 0, len(kvs))}
	for _, kv := range kvs {
		val := json.RawMessage(kv.Value)
		if !json.Valid(kv.Value) {
			val, _ = json.Marshal(string(kv.Value))
		}
		snap.Entries = append(snap.Entries, Entry{
			Key: string(kv.Key), Kind: s.k.parse(string(kv.Key)).Kind, Value: val,
			CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
			Version: kv.Version, Lease: kv.Lease,
		})
	}
	return snap, nil
}

package metastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BackupFormat names the file `tidemark metadata backup` writes.
const BackupFormat = "tidemark-metadata-backup"

// Backup is every durable key under the prefix at one revision: topics,
// assignments, partition states, configs, deletions, the producer id block,
// controller_epoch and the cluster id. Lease-bound keys (broker
// registrations, the active controller, controller nodes) are left out:
// they belong to running processes, which register again.
type Backup struct {
	Format   string        `json:"format"`
	Version  int           `json:"version"`
	Prefix   string        `json:"prefix"`
	Revision int64         `json:"revision"`
	TakenAt  time.Time     `json:"taken_at"`
	Entries  []BackupEntry `json:"entries"`
}

// BackupEntry is one key, relative to the prefix (so a backup can be
// restored under another), with its stored bytes.
type BackupEntry struct {
	Key string `json:"key"`
	// Kind says what the key holds, for a reader of the file; Restore
	// goes by the key.
	Kind  string `json:"kind"`
	Value []byte `json:"value"`
}

// Backup reads every durable key at one revision.
func (s *Store) Backup(ctx context.Context) (Backup, error) {
	kvs, rev, err := s.scan(ctx, s.k.all(), 0)
	if err != nil {
		return Backup{}, err
	}
	b := Backup{Format: BackupFormat, Version: 1, Prefix: s.k.p, Revision: rev, TakenAt: time.Now().UTC()}
	for _, kv := range kvs {
		if kv.Lease != 0 {
			continue
		}
		key := string(kv.Key)
		b.Entries = append(b.Entries, BackupEntry{Key: strings.TrimPrefix(key, s.k.p), Kind: s.k.parse(key).Kind.String(), Value: kv.Value})
	}
	return b, nil
}

// restoreBatch bounds the puts of one restore transaction (etcd's default
// limit is 128 operations).
const restoreBatch = 50

// Restore writes a backup into this prefix, which must hold no key and no
// running controller: it is for an etcd that was lost, not for rewinding a
// live cluster. Every epoch is raised by bump (controller_epoch, and each
// partition state's leader, partition and controller epochs), and the
// producer id block by bump blocks (from 0 when the backup has none), so
// that the restored metadata is newer than anything the brokers saw after
// the backup was taken (a broker ignores a leader epoch it has passed, and
// refuses a controller epoch older than one it obeyed) and no producer id
// is handed out twice. It returns the number of keys written.
func (s *Store) Restore(ctx context.Context, b Backup, bump int32) (int, error) {
	if b.Format != BackupFormat || b.Version != 1 {
		return 0, fmt.Errorf("not a tidemark metadata backup (format %q version %d)", b.Format, b.Version)
	}
	if bump < 0 {
		return 0, fmt.Errorf("epoch bump %d: must not be negative", bump)
	}
	resp, err := s.cli.Get(ctx, s.k.all(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("metastore: read %s: %w", s.k.all(), err)
	}
	if resp.Count > 0 {
		return 0, fmt.Errorf("%s already holds %d keys: restore writes into an empty prefix only "+
			"(stop the cluster's controllers and brokers, and remove the keys first, e.g. etcdctl del --prefix %s)",
			s.k.all(), resp.Count, s.k.all())
	}
	var ops []clientv3.Op
	var cmps []clientv3.Cmp
	put := func(key string, v []byte) {
		ops = append(ops, clientv3.OpPut(key, string(v)))
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	}
	hasBlock := false
	for _, e := range b.Entries {
		if !strings.HasPrefix(e.Key, "/") || strings.Contains(e.Key, "/../") {
			return 0, fmt.Errorf("backup key %q is not a key below a prefix", e.Key)
		}
		key := s.k.p + e.Key
		kind := s.k.parse(key).Kind
		v, err := bumped(kind, key, e.Value, bump)
		if err != nil {
			return 0, err
		}
		put(key, v)
		hasBlock = hasBlock || kind == KindProducerIDBlock
	}
	if !hasBlock && bump > 0 {
		// A backup taken before the first producer id block has no block
		// key, yet blocks may have been handed out after it: bump from 0.
		put(s.k.producerIDBlock(), []byte(encode(producerIDBlock{Next: bumpedBlockNext(0, bump)})))
	}
	written := 0
	for i := 0; i < len(ops); i += restoreBatch {
		j := min(i+restoreBatch, len(ops))
		txn, err := s.cli.Txn(ctx).If(cmps[i:j]...).Then(ops[i:j]...).Commit()
		if err != nil {
			return written, fmt.Errorf("metastore: restore: %w", err)
		}
		if !txn.Succeeded {
			return written, errors.New("metastore: restore: a key appeared under the prefix while restoring (is a controller running?)")
		}
		written += j - i
	}
	return written, nil
}

// bumped is a stored value with its epochs raised by bump.
func bumped(kind Kind, key string, v []byte, bump int32) ([]byte, error) {
	if bump == 0 {
		return v, nil
	}
	switch kind {
	case KindControllerEpoch:
		n, err := decodeEpoch(key, v)
		if err != nil {
			return nil, err
		}
		return []byte(strconv.FormatInt(int64(n)+int64(bump), 10)), nil
	case KindPartitionState:
		// Only the epochs change; every other field stays as stored.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, fmt.Errorf("metastore: decode %s: %w", key, err)
		}
		for _, f := range []string{"leader_epoch", "partition_epoch", "controller_epoch"} {
			var n int32
			if raw, ok := m[f]; ok {
				if err := json.Unmarshal(raw, &n); err != nil {
					return nil, fmt.Errorf("metastore: decode %s %s: %w", key, f, err)
				}
			}
			m[f] = json.RawMessage(strconv.FormatInt(int64(n)+int64(bump), 10))
		}
		return json.Marshal(m)
	case KindProducerIDBlock:
		blk, err := decode[producerIDBlock](key, v)
		if err != nil {
			return nil, err
		}
		blk.Next = bumpedBlockNext(blk.Next, bump)
		return []byte(encode(blk)), nil
	}
	return v, nil
}

// bumpedBlockNext moves the producer id counter past bump blocks, the most
// a cluster can have handed out since the backup without being refused
// ids again.
func bumpedBlockNext(next int64, bump int32) int64 {
	return next + int64(bump)*ProducerIDBlockSize
}

package metastore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/authz"
)

// ACL bindings live one a key, <p>/acls/<id>, the id a digest of the
// binding: the same binding created twice is one key, and deleting it is
// deleting that key. Only the active controller writes them (fenced, like
// every controller write); every broker and controller watches the prefix
// and decides by what it holds (services/aclsync, on services/etcdfollow).

// StoredACL is one binding as etcd holds it.
type StoredACL struct {
	Key     string
	Binding authz.Binding
}

func aclID(b authz.Binding) string {
	sum := sha256.Sum256([]byte(encode(b)))
	return hex.EncodeToString(sum[:16])
}

// ACLsPrefix is the prefix under which the bindings are kept.
func (s *Store) ACLsPrefix() string { return s.k.aclsDir() }

// ACLs reads every binding at one revision. A value that does not decode is
// logged and left out: it grants nothing.
func (s *Store) ACLs(ctx context.Context) ([]StoredACL, int64, error) {
	kvs, rev, err := s.scan(ctx, s.k.aclsDir(), 0)
	if err != nil {
		return nil, 0, err
	}
	out := make([]StoredACL, 0, len(kvs))
	for _, kv := range kvs {
		if b, ok := s.DecodeACL(string(kv.Key), kv.Value); ok {
			out = append(out, StoredACL{Key: string(kv.Key), Binding: b})
		}
	}
	return out, rev, nil
}

// DecodeACL decodes one stored binding; one that does not decode is logged
// and reported not ok.
func (s *Store) DecodeACL(key string, raw []byte) (authz.Binding, bool) {
	b, err := decode[authz.Binding](key, raw)
	if err != nil {
		s.log.Warn("ignoring an ACL binding that does not decode", slog.String("key", key), slog.String("err", err.Error()))
		return authz.Binding{}, false
	}
	return b, true
}

// CreateACLs writes the bindings (already validated) in fenced
// transactions; one already stored is written again, unchanged.
func (s *Session) CreateACLs(ctx context.Context, bs []authz.Binding) error {
	ops := make([]clientv3.Op, 0, len(bs))
	for _, b := range bs {
		ops = append(ops, clientv3.OpPut(s.s.k.acl(aclID(b)), encode(b)))
	}
	return s.commitChunks(ctx, ops)
}

// DeleteACLs removes the bindings under keys, in fenced transactions.
func (s *Session) DeleteACLs(ctx context.Context, keys []string) error {
	ops := make([]clientv3.Op, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, clientv3.OpDelete(k))
	}
	return s.commitChunks(ctx, ops)
}

// commitChunks commits ops in fenced transactions of at most what etcd
// takes; a fence that fails stops at that chunk.
func (s *Session) commitChunks(ctx context.Context, ops []clientv3.Op) error {
	per := s.s.maxOps - fenceCmps
	for len(ops) > 0 {
		n := min(per, len(ops))
		if _, err := s.commit(ctx, nil, ops[:n], nil); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

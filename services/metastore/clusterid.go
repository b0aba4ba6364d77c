package metastore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterIDValue is the value of <p>/cluster/id, shaped like Kafka's
// /cluster/id znode.
type clusterIDValue struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
}

// EnsureClusterID returns the cluster id, creating a random one the first
// time. The create is a compare-and-set on the key's absence, so concurrent
// callers all get the same id. It is not fenced: it is written once, before
// anything depends on it.
func (s *Store) EnsureClusterID(ctx context.Context) (string, error) {
	key := s.k.clusterID()
	v := clusterIDValue{Version: 1, ID: newTopicID()}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encode(v))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", fmt.Errorf("metastore: cluster id: %w", err)
	}
	if resp.Succeeded {
		return v.ID, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return "", fmt.Errorf("metastore: cluster id vanished")
	}
	cur, err := decode[clusterIDValue](key, kvs[0].Value)
	if err != nil {
		return "", err
	}
	return cur.ID, nil
}

// ClusterID reads the cluster id; ok is false while no controller has
// created it yet. Brokers read it (they may not write it) to check that
// their data dir belongs to this cluster.
func (s *Store) ClusterID(ctx context.Context) (id string, ok bool, err error) {
	key := s.k.clusterID()
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return "", false, fmt.Errorf("metastore: read cluster id: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", false, nil
	}
	cur, err := decode[clusterIDValue](key, resp.Kvs[0].Value)
	if err != nil {
		return "", false, err
	}
	return cur.ID, true, nil
}

package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"tidemark.io/services/broker/internal/metaprops"
)

// clusterIDPoll is how often a broker that started before any controller
// created the cluster id looks for it, to record it in meta.properties.
const clusterIDPoll = 500 * time.Millisecond

// checkBrokerID refuses a data dir whose meta.properties names another
// broker (Kafka's InconsistentBrokerIdException), and records this broker's
// id in a data dir that has none yet. It runs before any log is opened.
func checkBrokerID(dir string, id int32) error {
	m, found, err := metaprops.Read(dir)
	if err != nil {
		return fmt.Errorf("--data.dir %s: %w", dir, err)
	}
	if !found {
		return metaprops.Write(dir, metaprops.Meta{BrokerID: id})
	}
	if m.BrokerID != id {
		return fmt.Errorf("--data.dir %s holds the logs of broker %d (its %s), not of broker %d: refusing to start "+
			"(give --broker.id %d, or another data dir)", dir, m.BrokerID, metaprops.FileName, id, m.BrokerID)
	}
	return nil
}

// checkClusterID compares the cluster id etcd holds with the data dir's,
// before the broker registers. A data dir of another cluster, or one that
// has a cluster id while etcd has none (a new or wiped etcd), is refused
// (Kafka's InconsistentClusterIdException): its logs would be served as
// this cluster's. A data dir with no cluster id yet records etcd's, or,
// when etcd has none either, records it once a controller has created it.
func (r *registrar) checkClusterID(ctx context.Context) error {
	dir := r.b.cfg.DataDir
	r.b.metaMu.Lock()
	defer r.b.metaMu.Unlock()
	m, _, err := metaprops.Read(dir)
	if err != nil {
		return fmt.Errorf("--data.dir %s: %w", dir, err)
	}
	lookup, cancel := context.WithTimeout(ctx, 10*time.Second)
	id, ok, err := r.store.ClusterID(lookup)
	cancel()
	if err != nil {
		return fmt.Errorf("etcd at %s (--etcd.endpoints) did not answer the cluster id lookup: %w",
			strings.Join(r.b.cfg.Etcd.Endpoints, ","), err)
	}
	switch {
	case ok && m.ClusterID == id:
		return nil
	case ok && m.ClusterID == "":
		r.b.log.Info("recording the cluster id in the data dir", "cluster_id", id, "file", metaprops.FileName)
		m.ClusterID = id
		return metaprops.Write(dir, m)
	case ok:
		return fmt.Errorf("--data.dir %s belongs to cluster %s (its %s), but etcd (%s) holds cluster %s: refusing to start, "+
			"so that another cluster's logs are never served as this one's (point --etcd.endpoints at cluster %s, or give an empty data dir)",
			dir, m.ClusterID, metaprops.FileName, r.b.cfg.Etcd.Endpoints, id, m.ClusterID)
	case m.ClusterID != "":
		return fmt.Errorf("--data.dir %s belongs to cluster %s (its %s), but etcd (%s) holds no cluster id: it is a new "+
			"or wiped cluster, and refusing to start keeps cluster %s's logs out of it (point --etcd.endpoints at cluster %s, "+
			"or give an empty data dir)", dir, m.ClusterID, metaprops.FileName, r.b.cfg.Etcd.Endpoints, m.ClusterID, m.ClusterID)
	}
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.recordClusterIDWhenCreated() }()
	return nil
}

// recordClusterIDWhenCreated waits for the first controller to create the
// cluster id and records it in meta.properties.
func (r *registrar) recordClusterIDWhenCreated() {
	for r.ctx.Err() == nil {
		lookup, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		id, ok, err := r.store.ClusterID(lookup)
		cancel()
		if err == nil && ok {
			// Read again: the start recorded the log dirs in the same file.
			r.b.metaMu.Lock()
			m, _, err := metaprops.Read(r.b.cfg.DataDir)
			if err == nil {
				m.ClusterID = id
				err = metaprops.Write(r.b.cfg.DataDir, m)
			}
			r.b.metaMu.Unlock()
			if err != nil {
				r.b.log.Error("recording the cluster id in the data dir failed", "err", err)
			} else {
				r.b.log.Info("recorded the cluster id in the data dir", "cluster_id", id, "file", metaprops.FileName)
			}
			return
		}
		t := time.NewTimer(clusterIDPoll)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
		}
	}
}

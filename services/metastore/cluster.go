package metastore

import (
	"context"
	"log/slog"
)

// Cluster is all of tidemark's metadata at one etcd revision: what a newly
// elected controller loads before it acts. Keep it current by applying the
// events of Watch(ctx, Revision+1).
type Cluster struct {
	// Revision is the etcd revision the snapshot reflects.
	Revision int64
	// Controller is the active controller, nil if none.
	Controller *ControllerInfo
	// ControllerEpoch and ControllerEpochRevision are the epoch key's value
	// and ModRevision (0 before the first election).
	ControllerEpoch         int32
	ControllerEpochRevision int64
	Brokers                 map[int32]Broker
	Topics                  map[string]*Topic
	// BrokerConfigs is keyed by entity: a broker id or DefaultBrokerEntity.
	BrokerConfigs map[string]map[string]string
	// NextProducerID is the first producer id not yet handed out in a block.
	NextProducerID int64
	// Controllers are the running controller processes, active or standby.
	Controllers map[int32]ControllerNode
	// ClusterID is the cluster's id; empty until EnsureClusterID ran.
	ClusterID string
	// Users are the users' SCRAM credentials, by user.
	Users map[string]UserCredentials
}

func newCluster() *Cluster {
	return &Cluster{
		Brokers:       map[int32]Broker{},
		Topics:        map[string]*Topic{},
		BrokerConfigs: map[string]map[string]string{},
		Controllers:   map[int32]ControllerNode{},
		Users:         map[string]UserCredentials{},
	}
}

// LoadCluster reads every key under the prefix at one revision.
func (s *Store) LoadCluster(ctx context.Context) (*Cluster, error) {
	return s.load(ctx, s.k.all())
}

// load scans the given prefixes at one revision into a Cluster. Topics
// without an assignment (which tidemark's own writes never leave) are
// dropped with a warning. A revision compacted away before the last page is
// read again from the start at the newest (readAgain).
func (s *Store) load(ctx context.Context, prefixes ...string) (*Cluster, error) {
	var c *Cluster
	err := s.readAgain(ctx, prefixes[0], func() (err error) {
		c, err = s.loadAt(ctx, prefixes...)
		return err
	})
	return c, err
}

// loadAt is load at the revision of its first page.
func (s *Store) loadAt(ctx context.Context, prefixes ...string) (*Cluster, error) {
	c := newCluster()
	var rev int64
	for _, p := range prefixes {
		kvs, r, err := s.scanAt(ctx, p, rev)
		if err != nil {
			return nil, err
		}
		rev = r
		for _, kv := range kvs {
			ev := s.decodeKV(EventPut, string(kv.Key), kv.ModRevision, kv)
			if ev.Err != nil && (ev.Kind == KindTopicConfig || ev.Kind == KindBrokerConfig || ev.Kind == KindUserCredentials ||
				ev.Kind == KindBroker || ev.Kind == KindControllerNode) {
				// A config written behind tidemark's back (etcdctl, a
				// restore) that does not decode is ignored, as the
				// watch ignores it: failing the load ended every
				// controller term at once, and no controller worked.
				s.log.Warn("ignoring a config that does not decode; its entity has no overrides until it is written again",
					slog.String("key", ev.Key), slog.String("err", ev.Err.Error()))
				continue
			}
			if ev.Err != nil {
				return nil, ev.Err
			}
			c.Apply(ev)
		}
	}
	c.Revision = rev
	for name, t := range c.Topics {
		if t.ModRevision == 0 {
			s.log.Warn("ignoring topic metadata without an assignment", slog.String("topic", name))
			delete(c.Topics, name)
		}
	}
	return c, nil
}

// Apply folds one event into the snapshot. Events that failed to decode and
// keys of unknown kinds are ignored.
func (c *Cluster) Apply(ev Event) {
	if ev.Err != nil {
		return
	}
	c.Revision = max(c.Revision, ev.Revision)
	del := ev.Type == EventDelete
	switch ev.Kind {
	case KindController:
		c.Controller = nil
		if !del {
			c.Controller = ev.Controller
		}
	case KindControllerEpoch:
		if !del {
			c.ControllerEpoch, c.ControllerEpochRevision = ev.ControllerEpoch, ev.Revision
		}
	case KindBroker:
		if del {
			delete(c.Brokers, ev.BrokerID)
		} else if ev.Broker != nil {
			c.Brokers[ev.BrokerID] = *ev.Broker
		}
	case KindTopic:
		if del {
			delete(c.Topics, ev.Topic)
		} else if ev.Assignment != nil {
			t := c.topic(ev.Topic)
			t.Assignment, t.ModRevision = *ev.Assignment, ev.Revision
		}
	case KindPartitionState:
		if t := c.Topics[ev.Topic]; del && t != nil {
			delete(t.Partitions, ev.Partition)
		} else if !del && ev.State != nil {
			c.topic(ev.Topic).Partitions[ev.Partition] = *ev.State
		}
	case KindTopicConfig:
		if t := c.Topics[ev.Topic]; del && t != nil {
			t.Config = nil
		} else if !del {
			c.topic(ev.Topic).Config = ev.Config
		}
	case KindTopicDeletion:
		if t := c.Topics[ev.Topic]; del && t != nil {
			t.Deletion = nil
		} else if !del {
			c.topic(ev.Topic).Deletion = ev.Deletion
		}
	case KindUserCredentials:
		if del || len(ev.Credentials) == 0 {
			delete(c.Users, ev.User)
		} else {
			c.Users[ev.User] = ev.Credentials
		}
	case KindBrokerConfig:
		if del {
			delete(c.BrokerConfigs, ev.Entity)
		} else {
			c.BrokerConfigs[ev.Entity] = ev.Config
		}
	case KindProducerIDBlock:
		if !del {
			c.NextProducerID = ev.NextProducerID
		}
	case KindControllerNode:
		if del {
			delete(c.Controllers, ev.BrokerID)
		} else if ev.ControllerNode != nil {
			c.Controllers[ev.BrokerID] = *ev.ControllerNode
		}
	case KindClusterID:
		if !del {
			c.ClusterID = ev.ClusterID
		}
	}
}

// topic returns the named topic, creating an empty entry: keys of one topic
// may be applied in any order.
func (c *Cluster) topic(name string) *Topic {
	t := c.Topics[name]
	if t == nil {
		t = &Topic{Name: name, Partitions: map[int32]PartitionRecord{}}
		c.Topics[name] = t
	}
	return t
}

package metastore

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/kerr"
)

// TopicConfig reads a topic's config overrides (empty if it has none).
func (s *Store) TopicConfig(ctx context.Context, topic string) (map[string]string, error) {
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	return s.readConfig(ctx, s.k.topicConfig(topic))
}

// BrokerConfig reads the overrides of a broker entity: BrokerEntity(id) or
// DefaultBrokerEntity.
func (s *Store) BrokerConfig(ctx context.Context, entity string) (map[string]string, error) {
	if err := validEntity(entity); err != nil {
		return nil, err
	}
	return s.readConfig(ctx, s.k.brokerConfig(entity))
}

func (s *Store) readConfig(ctx context.Context, key string) (map[string]string, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("metastore: read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return map[string]string{}, nil
	}
	return decode[map[string]string](key, resp.Kvs[0].Value)
}

// PutTopicConfig replaces a topic's config overrides. The topic must exist
// (else UNKNOWN_TOPIC_OR_PARTITION). An empty cfg deletes them.
func (s *Session) PutTopicConfig(ctx context.Context, topic string, cfg map[string]string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	k := s.s.k
	op := clientv3.OpDelete(k.topicConfig(topic))
	if len(cfg) > 0 {
		op = clientv3.OpPut(k.topicConfig(topic), encode(cfg))
	}
	resp, err := s.commit(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.topic(topic)), ">", 0)},
		[]clientv3.Op{op}, nil)
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", topic)
	}
	return nil
}

// DeleteTopicConfig removes a topic's config overrides.
func (s *Session) DeleteTopicConfig(ctx context.Context, topic string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	_, err := s.commit(ctx, nil, []clientv3.Op{clientv3.OpDelete(s.s.k.topicConfig(topic))}, nil)
	return err
}

// PutBrokerConfig replaces a broker entity's config overrides. An empty cfg
// deletes them.
func (s *Session) PutBrokerConfig(ctx context.Context, entity string, cfg map[string]string) error {
	if err := validEntity(entity); err != nil {
		return err
	}
	if len(cfg) == 0 {
		return s.DeleteBrokerConfig(ctx, entity)
	}
	_, err := s.commit(ctx, nil, []clientv3.Op{clientv3.OpPut(s.s.k.brokerConfig(entity), encode(cfg))}, nil)
	return err
}

// DeleteBrokerConfig removes a broker entity's config overrides.
func (s *Session) DeleteBrokerConfig(ctx context.Context, entity string) error {
	if err := validEntity(entity); err != nil {
		return err
	}
	_, err := s.commit(ctx, nil, []clientv3.Op{clientv3.OpDelete(s.s.k.brokerConfig(entity))}, nil)
	return err
}

func validEntity(entity string) error {
	if entity == DefaultBrokerEntity {
		return nil
	}
	if n, err := strconv.ParseInt(entity, 10, 32); err != nil || n < 0 || strconv.FormatInt(n, 10) != entity {
		return kerr.BadField(kerr.InvalidRequest, "entity", "%q is neither a broker id nor %s", entity, DefaultBrokerEntity)
	}
	return nil
}

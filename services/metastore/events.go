package metastore

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// EventType says whether a key was written or deleted.
type EventType int

// The event types.
const (
	EventPut EventType = iota + 1
	EventDelete
)

func (t EventType) String() string {
	if t == EventDelete {
		return "delete"
	}
	return "put"
}

// Event is one decoded change (or, from LoadCluster, one key). Which value
// field is set depends on Kind; for a delete it holds the value just before
// the delete, when etcd still had it.
type Event struct {
	Type     EventType
	Kind     Kind
	Key      string
	Revision int64 // the ModRevision of the change

	Topic     string // KindTopic, KindPartitionState, KindTopicConfig, KindTopicDeletion
	Partition int32  // KindPartitionState
	BrokerID  int32  // KindBroker; KindBrokerConfig (-1 for <default>); KindControllerNode (the controller id)
	Entity    string // KindBrokerConfig
	User      string // KindUserCredentials

	Controller      *ControllerInfo   // KindController
	ControllerEpoch int32             // KindControllerEpoch
	Broker          *Broker           // KindBroker
	Assignment      *TopicAssignment  // KindTopic
	State           *PartitionRecord  // KindPartitionState
	Config          map[string]string // KindTopicConfig, KindBrokerConfig
	Deletion        *TopicDeletion    // KindTopicDeletion
	NextProducerID  int64             // KindProducerIDBlock
	ControllerNode  *ControllerNode   // KindControllerNode
	ClusterID       string            // KindClusterID
	Credentials     UserCredentials   // KindUserCredentials

	// Raw is the value undecoded, for those who decode it themselves
	// (services/etcdfollow's users: ACL bindings, client quotas, users).
	Raw []byte

	// Err is set when the value could not be decoded; the value fields are then empty.
	Err error
}

// decodeKV turns one key-value into an Event. kv may be a deleted key's
// previous value, or nil when etcd no longer had it.
func (s *Store) decodeKV(typ EventType, key string, rev int64, kv *mvccpb.KeyValue) Event {
	ki := s.k.parse(key)
	ev := Event{Type: typ, Kind: ki.Kind, Key: key, Revision: rev, Topic: ki.Topic,
		Partition: ki.Partition, BrokerID: ki.BrokerID, Entity: ki.Entity, User: ki.User}
	if kv == nil || len(kv.Value) == 0 {
		return ev
	}
	var err error
	switch ki.Kind {
	case KindController:
		var v ControllerInfo
		v, err = decode[ControllerInfo](key, kv.Value)
		ev.Controller = &v
	case KindControllerEpoch:
		ev.ControllerEpoch, err = decodeEpoch(key, kv.Value)
	case KindBroker:
		var v BrokerInfo
		v, err = decode[BrokerInfo](key, kv.Value)
		ev.Broker = &Broker{BrokerInfo: v, Epoch: kv.CreateRevision}
	case KindTopic:
		var v TopicAssignment
		v, err = decode[TopicAssignment](key, kv.Value)
		ev.Assignment = &v
	case KindPartitionState:
		var v PartitionState
		v, err = decode[PartitionState](key, kv.Value)
		ev.State = &PartitionRecord{Topic: ki.Topic, Partition: ki.Partition, State: v, ModRevision: kv.ModRevision}
	case KindTopicConfig, KindBrokerConfig:
		ev.Config, err = decode[map[string]string](key, kv.Value)
	case KindTopicDeletion:
		var v TopicDeletion
		v, err = decode[TopicDeletion](key, kv.Value)
		ev.Deletion = &v
	case KindProducerIDBlock:
		var v producerIDBlock
		v, err = decode[producerIDBlock](key, kv.Value)
		ev.NextProducerID = v.Next
	case KindControllerNode:
		var v ControllerNode
		v, err = decode[ControllerNode](key, kv.Value)
		ev.ControllerNode = &v
	case KindUserCredentials:
		ev.Credentials, err = decode[UserCredentials](key, kv.Value)
	case KindClusterID:
		var v clusterIDValue
		v, err = decode[clusterIDValue](key, kv.Value)
		ev.ClusterID = v.ID
	}
	if err != nil {
		ev = Event{Type: typ, Kind: ki.Kind, Key: key, Revision: rev, Topic: ki.Topic,
			Partition: ki.Partition, BrokerID: ki.BrokerID, Entity: ki.Entity, User: ki.User, Err: err}
	}
	ev.Raw = kv.Value
	return ev
}

package metastore

import (
	"net/url"
	"strconv"
	"strings"
)

// DefaultPrefix is the root of tidemark's keys when Options.Prefix is empty.
const DefaultPrefix = "/tidemark"

// DefaultBrokerEntity names the cluster-wide broker config, as in Kafka.
const DefaultBrokerEntity = "<default>"

// BrokerEntity is the broker config entity name for broker id.
func BrokerEntity(id int32) string { return strconv.FormatInt(int64(id), 10) }

// Kind says what a key under the prefix holds.
type Kind int

// The kinds of key.
const (
	KindUnknown Kind = iota
	KindController
	KindControllerEpoch
	KindBroker
	KindTopic
	KindPartitionState
	KindTopicConfig
	KindBrokerConfig
	KindTopicDeletion
	KindProducerIDBlock
	KindControllerNode
	KindClusterID
	KindACL
	KindUserCredentials
	KindClientQuota
)

var kindNames = [...]string{"unknown", "controller", "controller_epoch", "broker", "topic",
	"partition_state", "topic_config", "broker_config", "topic_deletion", "producer_id_block",
	"controller_node", "cluster_id", "acl", "user_credentials", "client_quota"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// MarshalText makes kinds readable in JSON dumps.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// keys builds and parses the key layout under one prefix.
type keys struct{ p string }

func (k keys) all() string                  { return k.p + "/" }
func (k keys) controller() string           { return k.p + "/controller" }
func (k keys) controllerEpoch() string      { return k.p + "/controller_epoch" }
func (k keys) brokersDir() string           { return k.p + "/brokers/ids/" }
func (k keys) broker(id int32) string       { return k.brokersDir() + BrokerEntity(id) }
func (k keys) topicsDir() string            { return k.p + "/brokers/topics/" }
func (k keys) topic(t string) string        { return k.topicsDir() + t }
func (k keys) topicSubtree(t string) string { return k.topic(t) + "/" }
func (k keys) partitionState(t string, p int32) string {
	return k.topicSubtree(t) + "partitions/" + strconv.FormatInt(int64(p), 10) + "/state"
}
func (k keys) configDir() string              { return k.p + "/config/" }
func (k keys) topicConfig(t string) string    { return k.configDir() + "topics/" + t }
func (k keys) brokerConfig(ent string) string { return k.configDir() + "brokers/" + ent }
func (k keys) usersDir() string               { return k.configDir() + "users/" }
func (k keys) userCredentials(user string) string {
	return k.usersDir() + url.PathEscape(user)
}
func (k keys) deletionsDir() string           { return k.p + "/admin/delete_topics/" }
func (k keys) topicDeletion(t string) string  { return k.deletionsDir() + t }
func (k keys) producerIDBlock() string        { return k.p + "/producer_id_block" }
func (k keys) controllersDir() string         { return k.p + "/controllers/" }
func (k keys) controllerNode(id int32) string { return k.controllersDir() + BrokerEntity(id) }
func (k keys) clusterID() string              { return k.p + "/cluster/id" }
func (k keys) aclsDir() string                { return k.p + "/acls/" }
func (k keys) acl(id string) string           { return k.aclsDir() + id }

// keyInfo is what a key names.
type keyInfo struct {
	Kind      Kind
	Topic     string
	Partition int32
	BrokerID  int32  // also the controller id of a controller node
	Entity    string // broker config entity
	User      string // user credentials' user
	Quota     QuotaEntity
}

// parse classifies a full key. Keys it does not recognise are KindUnknown.
func (k keys) parse(key string) keyInfo {
	rel, ok := strings.CutPrefix(key, k.all())
	if !ok {
		return keyInfo{}
	}
	parts := strings.Split(rel, "/")
	switch {
	case rel == "controller":
		return keyInfo{Kind: KindController}
	case rel == "controller_epoch":
		return keyInfo{Kind: KindControllerEpoch}
	case rel == "producer_id_block":
		return keyInfo{Kind: KindProducerIDBlock}
	case rel == "cluster/id":
		return keyInfo{Kind: KindClusterID}
	case len(parts) == 2 && parts[0] == "acls" && parts[1] != "":
		return keyInfo{Kind: KindACL}
	case len(parts) >= 3 && parts[0] == "quotas":
		if e, ok := parseQuota(parts[1:]); ok {
			return keyInfo{Kind: KindClientQuota, Quota: e}
		}
	case len(parts) == 2 && parts[0] == "controllers":
		if id, ok := parseID(parts[1]); ok {
			return keyInfo{Kind: KindControllerNode, BrokerID: id}
		}
	case len(parts) == 3 && parts[0] == "brokers" && parts[1] == "ids":
		if id, ok := parseID(parts[2]); ok {
			return keyInfo{Kind: KindBroker, BrokerID: id}
		}
	case (len(parts) == 3 || len(parts) == 6) && parts[0] == "brokers" && parts[1] == "topics" && !ValidTopicName(parts[2]),
		len(parts) == 3 && (parts[0] == "config" && parts[1] == "topics" || parts[0] == "admin" && parts[1] == "delete_topics") && !ValidTopicName(parts[2]):
		return keyInfo{} // not a legal topic name: no key tidemark wrote
	case len(parts) == 3 && parts[0] == "brokers" && parts[1] == "topics":
		return keyInfo{Kind: KindTopic, Topic: parts[2]}
	case len(parts) == 6 && parts[0] == "brokers" && parts[1] == "topics" &&
		parts[3] == "partitions" && parts[5] == "state":
		if p, ok := parseID(parts[4]); ok {
			return keyInfo{Kind: KindPartitionState, Topic: parts[2], Partition: p}
		}
	case len(parts) == 3 && parts[0] == "config" && parts[1] == "topics":
		return keyInfo{Kind: KindTopicConfig, Topic: parts[2]}
	case len(parts) == 3 && parts[0] == "config" && parts[1] == "brokers":
		info := keyInfo{Kind: KindBrokerConfig, Entity: parts[2], BrokerID: -1}
		if id, ok := parseID(parts[2]); ok {
			info.BrokerID = id
		}
		return info
	case len(parts) == 3 && parts[0] == "admin" && parts[1] == "delete_topics":
		return keyInfo{Kind: KindTopicDeletion, Topic: parts[2]}
	case len(parts) == 3 && parts[0] == "config" && parts[1] == "users":
		if u, err := url.PathUnescape(parts[2]); err == nil && CheckUserName(u) == nil {
			return keyInfo{Kind: KindUserCredentials, User: u}
		}
	}
	return keyInfo{}
}

func parseID(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s { // "01", "+1": not a key tidemark writes
		return 0, false
	}
	return int32(n), true
}

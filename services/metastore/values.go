package metastore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ControllerInfo is the value of <p>/controller.
type ControllerInfo struct {
	ControllerID int32     `json:"controller_id"`
	Address      string    `json:"address"`
	Epoch        int32     `json:"epoch"`
	ElectedAt    time.Time `json:"elected_at"`
}

// BrokerInfo is the value of <p>/brokers/ids/<id>.
type BrokerInfo struct {
	ID           int32     `json:"id"`
	Address      string    `json:"address"`
	Rack         string    `json:"rack,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
	// Endpoints holds further named listeners (e.g. "http"), if any.
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// StaticConfigs are the broker's static settings (its `--config=k=v`
	// flags, Kafka's server.properties), so the controller can describe a
	// broker's configuration as the broker runs it (STATIC_BROKER_CONFIG).
	// Only the keys given at startup; the rest are defaults.
	StaticConfigs map[string]string `json:"static_configs,omitempty"`
}

// Broker is a live broker registration.
type Broker struct {
	BrokerInfo
	// Epoch is the CreateRevision of the registration key: it grows with
	// every registration, so it tells incarnations of one broker id apart.
	Epoch int64 `json:"broker_epoch"`
}

// TopicAssignment is the value of <p>/brokers/topics/<topic>: the replicas of
// each partition, in preference order. JSON object keys are partition numbers.
type TopicAssignment struct {
	Version    int               `json:"version"`
	TopicID    string            `json:"topic_id"`
	Partitions map[int32][]int32 `json:"partitions"`
	// AddingReplicas and RemovingReplicas describe a reassignment in flight.
	AddingReplicas   map[int32][]int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas map[int32][]int32 `json:"removing_replicas,omitempty"`
}

// assignmentVersion is the schema version written in TopicAssignment.Version.
const assignmentVersion = 1

// PartitionState is the value of <p>/brokers/topics/<t>/partitions/<n>/state.
type PartitionState struct {
	Leader      int32   `json:"leader"` // -1: no leader
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	// ControllerEpoch is the epoch of the controller that wrote this state.
	ControllerEpoch int32 `json:"controller_epoch"`
	// PartitionEpoch counts writes to this state: 0 when created, +1 on
	// every update. It plays the role of Kafka's zkVersion.
	PartitionEpoch int32 `json:"partition_epoch"`
	// EmptyLogLeader: an unclean election made Leader lead from an empty
	// log, its own having been lost (a replaced log dir). The next write of
	// the state drops it: by then the leader has its log.
	EmptyLogLeader bool `json:"empty_log_leader,omitempty"`
}

// PartitionRecord is a partition's state as read, with the etcd revision
// that a compare-and-set update must name.
type PartitionRecord struct {
	Topic       string         `json:"topic"`
	Partition   int32          `json:"partition"`
	State       PartitionState `json:"state"`
	ModRevision int64          `json:"mod_revision"`
}

// TopicDeletion is the value of <p>/admin/delete_topics/<topic>.
type TopicDeletion struct {
	RequestedAt time.Time `json:"requested_at"`
}

// producerIDBlock is the value of <p>/producer_id_block.
type producerIDBlock struct {
	Next int64 `json:"next"`
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own value types are encoded; they always marshal.
		panic(fmt.Sprintf("metastore: encode %T: %v", v, err))
	}
	return string(b)
}

// ErrUndecodable marks a value in etcd that does not decode (one written
// behind tidemark's back): reading it again will not help.
var ErrUndecodable = errors.New("the value does not decode")

func decode[T any](key string, raw []byte) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("metastore: decode %s: %w: %w", key, ErrUndecodable, err)
	}
	return v, nil
}

func decodeEpoch(key string, raw []byte) (int32, error) {
	n, err := strconv.ParseInt(string(raw), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("metastore: decode %s: %w", key, err)
	}
	return int32(n), nil
}

package topicconfig

import "strings"

// Special values.
const (
	// Unlimited in retention.ms or retention.bytes keeps data forever / at any size.
	Unlimited int64 = -1
	// TruncateByLeaderEpoch and TruncateByHighWatermark are the values of
	// replica.truncation.mode.
	TruncateByLeaderEpoch   = "leader-epoch"
	TruncateByHighWatermark = "high-watermark"
	// CleanupDelete and CleanupCompact are the elements of cleanup.policy.
	CleanupDelete  = "delete"
	CleanupCompact = "compact"
	// CompressionProducer is the one compression.type: keep the producer's.
	CompressionProducer = "producer"
)

// TopicConfig is the effective configuration of one topic.
type TopicConfig struct {
	MinInsyncReplicas           int32
	UncleanLeaderElectionEnable bool
	RetentionMs                 int64 // Unlimited = keep forever
	RetentionBytes              int64 // Unlimited = no size limit, per partition
	SegmentBytes                int32
	SegmentMs                   int64
	MaxMessageBytes             int32
	FlushMessages               int64
	FlushMs                     int64
	IndexIntervalBytes          int32
	// Preallocate reserves segments' disk blocks ahead of their appends.
	Preallocate bool
	// MessageTimestampBeforeMaxMs and MessageTimestampAfterMaxMs bound how
	// far a CreateTime record's timestamp may lie behind or ahead of the
	// leader's clock (KIP-937).
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	// CleanupPolicy is cleanup.policy normalised: "delete", "compact" or
	// "compact,delete".
	CleanupPolicy string
	// MinCleanableDirtyRatio, DeleteRetentionMs, MinCompactionLagMs and
	// MaxCompactionLagMs steer the log cleaner of compacted topics.
	MinCleanableDirtyRatio float64
	DeleteRetentionMs      int64
	MinCompactionLagMs     int64
	MaxCompactionLagMs     int64
	// CompressionType is compression.type; only "producer" (batches kept
	// as the producer compressed them).
	CompressionType string
	// LeaderReplicationThrottledReplicas and
	// FollowerReplicationThrottledReplicas list the throttled replicas
	// ("partition:broker,..." or "*"; see ParseThrottledReplicas).
	LeaderReplicationThrottledReplicas   string
	FollowerReplicationThrottledReplicas string
}

// Compact reports whether cleanup.policy includes compact.
func (c TopicConfig) Compact() bool { return strings.Contains(c.CleanupPolicy, CleanupCompact) }

// Delete reports whether cleanup.policy includes delete.
func (c TopicConfig) Delete() bool { return strings.Contains(c.CleanupPolicy, CleanupDelete) }

// BrokerConfig is the effective broker-level configuration.
type BrokerConfig struct {
	// TopicDefaults are the broker's defaults for topic-level settings.
	TopicDefaults TopicConfig

	ReplicaLagTimeMaxMs                 int64
	ReplicaFetchWaitMaxMs               int32
	ReplicaFetchMinBytes                int32
	ReplicaFetchMaxBytes                int32
	ReplicaFetchResponseMaxBytes        int32
	NumReplicaFetchers                  int32
	AutoLeaderRebalanceEnable           bool
	LeaderImbalancePerBrokerPercentage  int32
	LeaderImbalanceCheckIntervalSeconds int64
	ReplicaTruncationMode               string // TruncateByLeaderEpoch or TruncateByHighWatermark
	DefaultReplicationFactor            int32
	NumPartitions                       int32
	AutoCreateTopicsEnable              bool // Metadata creates the unknown topics it names (Kafka's auto.create.topics.enable)
	LogFlushFsyncEveryAppend            bool
	LogRetentionCheckIntervalMs         int64
	// How often the offset checkpoints are written (each an fsync).
	ReplicaHighWatermarkCheckpointIntervalMs int64
	LogFlushOffsetCheckpointIntervalMs       int64
	LogMaxOpenFiles                          int32 // bound of the broker's open segment files
	LogFollowerCachedBytes                   int64 // page cache kept per follower segment; <= 0 keeps all
	ProducerIDExpirationMs                   int32 // idle time after which an idempotent producer's state is dropped

	// The log cleaner (compaction of cleanup.policy=compact topics).
	LogCleanerEnable           bool
	LogCleanerThreads          int32
	LogCleanerBackoffMs        int64
	LogCleanerDedupeBufferSize int64

	// Consumer groups: the internal __consumer_offsets topic (created by
	// the controller on first use) and the group coordinator's limits.
	OffsetsTopicNumPartitions     int32
	OffsetsTopicReplicationFactor int32
	OffsetsRetentionMinutes       int64
	// How often the coordinator expires offsets and forgets Empty groups
	// without offsets (Kafka's cleanup of group metadata).
	OffsetsRetentionCheckIntervalMs int64
	OffsetMetadataMaxBytes          int32
	GroupInitialRebalanceDelayMs    int64
	GroupMinSessionTimeoutMs        int64
	GroupMaxSessionTimeoutMs        int64
	GroupMaxSize                    int32

	// Limits on what one client may ask of the broker.
	FetchMaxBytes               int32
	ProduceMaxRecordsPerRequest int32
	RequestTimeoutMaxMs         int32

	// Byte-rate quotas (bytes/s) per principal: the defaults, and
	// overrides as "principal:rate,..." (see ParseRateOverrides).
	QuotaProducerDefault   int64
	QuotaConsumerDefault   int64
	QuotaProducerOverrides string
	QuotaConsumerOverrides string
	QuotaWindowNum         int32
	QuotaWindowSizeSeconds int32

	// Replication throttles (bytes/s) and their rate's samples (KIP-73).
	LeaderReplicationThrottledRate    int64
	FollowerReplicationThrottledRate  int64
	ReplicationQuotaWindowNum         int32
	ReplicationQuotaWindowSizeSeconds int32
}

package topicconfig

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Value ranges. segment.bytes has a minimum of 1 KiB: small enough for
// tests that roll many segments, large enough to hold a batch header and an
// index entry. Kafka allows 14 bytes (before 4.0) or 1 MiB (from 4.0, KIP-1030).
const minSegmentBytes = 1024

// minRetentionCheckIntervalMs bounds log.retention.check.interval.ms and
// the checkpoint intervals: short
// enough for tests and demonstrations to see retention act within a second,
// long enough that a typo does not turn the check into a busy loop.
const minRetentionCheckIntervalMs = 100

var (
	maxLong = strconv.FormatInt(math.MaxInt64, 10)
	week    = strconv.FormatInt(7*24*60*60*1000, 10)
)

// defs is the registry. Topic-level settings come first, then broker-only
// ones; Definitions returns them sorted by name.
var defs = []Def{
	// Topic-level settings and their broker-level defaults.
	{Name: "min.insync.replicas", BrokerName: "min.insync.replicas", TopicLevel: true, Dynamic: true,
		Type: TypeInt, Default: "1", Min: 1,
		Doc:      "Fewest ISR members for an acks=all write to succeed; fewer gives NOT_ENOUGH_REPLICAS.",
		setTopic: tInt32(func(c *TopicConfig) *int32 { return &c.MinInsyncReplicas })},
	{Name: "unclean.leader.election.enable", BrokerName: "unclean.leader.election.enable", TopicLevel: true, Dynamic: true,
		Type: TypeBool, Default: "false",
		Doc:      "Elect an out-of-sync replica when no ISR member is live, at the cost of losing acknowledged data.",
		setTopic: tBool(func(c *TopicConfig) *bool { return &c.UncleanLeaderElectionEnable })},
	{Name: "retention.ms", BrokerName: "log.retention.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: week, Min: -1,
		Doc:      "How long to keep a closed segment, by its newest record; -1 keeps data forever.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.RetentionMs })},
	{Name: "retention.bytes", BrokerName: "log.retention.bytes", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: "-1", Min: -1,
		Doc:      "Largest size of one partition's log before old segments are deleted; -1 sets no limit.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.RetentionBytes })},
	{Name: "segment.bytes", BrokerName: "log.segment.bytes", TopicLevel: true, Dynamic: true,
		Type: TypeInt, Default: "1073741824", Min: minSegmentBytes,
		Doc:      "Size at which the active segment is closed and a new one started.",
		setTopic: tInt32(func(c *TopicConfig) *int32 { return &c.SegmentBytes })},
	{Name: "segment.ms", BrokerName: "log.roll.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: week, Min: 1,
		Doc:      "Age at which the active segment is closed even if not full, so retention can delete it.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.SegmentMs })},
	{Name: "max.message.bytes", BrokerName: "message.max.bytes", TopicLevel: true, Dynamic: true,
		Type: TypeInt, Default: "1048588", Min: 0,
		Doc:      "Largest record batch the leader accepts, after compression.",
		setTopic: tInt32(func(c *TopicConfig) *int32 { return &c.MaxMessageBytes })},
	{Name: "flush.messages", BrokerName: "log.flush.interval.messages", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 1,
		Doc:      "Force an fsync after this many records; the default leaves durability to replication.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.FlushMessages })},
	{Name: "flush.ms", BrokerName: "log.flush.interval.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 0,
		Doc:      "Force an fsync when unflushed data is this old (0: at every check, once a second); the default leaves durability to replication.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.FlushMs })},
	{Name: "preallocate", BrokerName: "log.preallocate", TopicLevel: true, Dynamic: true,
		Type: TypeBool, Default: "false",
		Doc:      "Reserve each new segment's disk blocks (up to segment.bytes) before it is written, so the file system allocates nothing as appends are written back; costs up to twice segment.bytes of disk per partition.",
		setTopic: tBool(func(c *TopicConfig) *bool { return &c.Preallocate })},
	{Name: "index.interval.bytes", BrokerName: "log.index.interval.bytes", TopicLevel: true, Dynamic: true,
		Type: TypeInt, Default: "4096", Min: 0,
		Doc:      "Bytes of log between two entries of the sparse offset index.",
		setTopic: tInt32(func(c *TopicConfig) *int32 { return &c.IndexIntervalBytes })},
	{Name: "message.timestamp.before.max.ms", BrokerName: "log.message.timestamp.before.max.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 0,
		Doc:      "Largest allowed distance of a CreateTime record's timestamp behind the leader's clock; older gives INVALID_TIMESTAMP.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.MessageTimestampBeforeMaxMs })},
	{Name: "message.timestamp.after.max.ms", BrokerName: "log.message.timestamp.after.max.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 0,
		Doc:      "Largest allowed distance of a CreateTime record's timestamp ahead of the leader's clock; later gives INVALID_TIMESTAMP.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.MessageTimestampAfterMaxMs })},
	{Name: "cleanup.policy", BrokerName: "log.cleanup.policy", TopicLevel: true, Dynamic: true,
		Type: TypeList, Default: CleanupDelete, Valid: []string{CleanupDelete, CleanupCompact}, Check: checkCleanupPolicy,
		Doc:      "delete: retention.ms and retention.bytes delete old segments; compact: the log cleaner keeps the latest record per key; compact,delete: both.",
		setTopic: func(c *TopicConfig, v value) { c.CleanupPolicy = normalisePolicy(v.l) }},
	{Name: "compression.type", BrokerName: "compression.type", TopicLevel: true, Dynamic: true,
		Type: TypeString, Default: CompressionProducer, Check: checkCompressionType,
		Doc:      "producer: batches are stored and served as the producer compressed them (none, gzip, snappy, lz4 or zstd). Recompressing to one codec is not supported.",
		setTopic: func(c *TopicConfig, v value) { c.CompressionType = v.s }},
	{Name: "min.cleanable.dirty.ratio", BrokerName: "log.cleaner.min.cleanable.ratio", TopicLevel: true, Dynamic: true,
		Type: TypeDouble, Default: "0.5", MinF: 0, MaxF: 1,
		Doc:      "Share of a compacted log not yet cleaned above which the cleaner cleans it.",
		setTopic: func(c *TopicConfig, v value) { c.MinCleanableDirtyRatio = v.f }},
	{Name: "delete.retention.ms", BrokerName: "log.cleaner.delete.retention.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: "86400000", Min: 0,
		Doc:      "How long a tombstone (a record with a null value) of a compacted topic is kept after its segment was cleaned.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.DeleteRetentionMs })},
	{Name: "min.compaction.lag.ms", BrokerName: "log.cleaner.min.compaction.lag.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: "0", Min: 0,
		Doc:      "Youngest a record may be and still be compacted away.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.MinCompactionLagMs })},
	{Name: "max.compaction.lag.ms", BrokerName: "log.cleaner.max.compaction.lag.ms", TopicLevel: true, Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 1,
		Doc:      "Oldest an uncompacted record may get: its log is cleaned then whatever its dirty ratio.",
		setTopic: tInt64(func(c *TopicConfig) *int64 { return &c.MaxCompactionLagMs })},

	// Replication throttles (KIP-73). Kafka has no broker synonym for the
	// lists; here the broker key of the same name sets a default for every
	// topic (e.g. * cluster-wide while moving everything off a broker).
	{Name: "leader.replication.throttled.replicas", BrokerName: "leader.replication.throttled.replicas", TopicLevel: true, Dynamic: true,
		Type: TypeString, Default: "", Check: checkThrottledReplicas,
		Doc:      "Replicas whose leader-side replication is throttled to leader.replication.throttled.rate, as partition:broker pairs (the broker leading) or *.",
		setTopic: tString(func(c *TopicConfig) *string { return &c.LeaderReplicationThrottledReplicas })},
	{Name: "follower.replication.throttled.replicas", BrokerName: "follower.replication.throttled.replicas", TopicLevel: true, Dynamic: true,
		Type: TypeString, Default: "", Check: checkThrottledReplicas,
		Doc:      "Replicas whose follower-side replication is throttled to follower.replication.throttled.rate, as partition:broker pairs (the broker following) or *.",
		setTopic: tString(func(c *TopicConfig) *string { return &c.FollowerReplicationThrottledReplicas })},

	// Broker-only settings.
	{Name: "replica.lag.time.max.ms", BrokerName: "replica.lag.time.max.ms",
		Type: TypeLong, Default: "30000", Min: 1,
		Doc:       "A follower not caught up to the leader's end for this long leaves the ISR.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.ReplicaLagTimeMaxMs })},
	{Name: "replica.fetch.wait.max.ms", BrokerName: "replica.fetch.wait.max.ms",
		Type: TypeInt, Default: "500", Min: 0,
		Doc:       "Longest a follower's fetch waits at the leader for data; at most replica.lag.time.max.ms.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ReplicaFetchWaitMaxMs })},
	{Name: "replica.fetch.min.bytes", BrokerName: "replica.fetch.min.bytes",
		Type: TypeInt, Default: "1", Min: 0,
		Doc:       "Bytes a follower's fetch waits for before the leader answers early.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ReplicaFetchMinBytes })},
	{Name: "replica.fetch.max.bytes", BrokerName: "replica.fetch.max.bytes",
		Type: TypeInt, Default: "1048576", Min: 0,
		Doc:       "Most bytes fetched per partition per follower fetch; a larger first batch is still returned.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ReplicaFetchMaxBytes })},
	{Name: "replica.fetch.response.max.bytes", BrokerName: "replica.fetch.response.max.bytes",
		Type: TypeInt, Default: "10485760", Min: 0,
		Doc:       "Most bytes in one follower fetch response over all partitions.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ReplicaFetchResponseMaxBytes })},
	{Name: "num.replica.fetchers", BrokerName: "num.replica.fetchers", Dynamic: true,
		Type: TypeInt, Default: "1", Min: 1,
		Doc:       "Fetcher goroutines per source broker.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.NumReplicaFetchers })},
	{Name: "auto.leader.rebalance.enable", BrokerName: "auto.leader.rebalance.enable",
		Type: TypeBool, Default: "true",
		Doc:       "Let the controller move leadership back to preferred replicas when brokers are imbalanced.",
		setBroker: bBool(func(c *BrokerConfig) *bool { return &c.AutoLeaderRebalanceEnable })},
	{Name: "leader.imbalance.per.broker.percentage", BrokerName: "leader.imbalance.per.broker.percentage",
		Type: TypeInt, Default: "10", Min: 0, Max: 100,
		Doc:       "Percentage of a broker's preferred partitions led elsewhere above which the controller rebalances.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.LeaderImbalancePerBrokerPercentage })},
	{Name: "leader.imbalance.check.interval.seconds", BrokerName: "leader.imbalance.check.interval.seconds",
		Type: TypeLong, Default: "300", Min: 1,
		Doc:       "How often the controller checks leader imbalance.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.LeaderImbalanceCheckIntervalSeconds })},
	{Name: "replica.truncation.mode", BrokerName: "replica.truncation.mode",
		Type: TypeString, Default: TruncateByLeaderEpoch, Valid: []string{TruncateByLeaderEpoch, TruncateByHighWatermark},
		Doc:       "How a follower finds where its log diverges: by leader epoch or, as before KIP-101, by high watermark.",
		setBroker: bString(func(c *BrokerConfig) *string { return &c.ReplicaTruncationMode })},
	{Name: "default.replication.factor", BrokerName: "default.replication.factor",
		Type: TypeInt, Default: "1", Min: 1,
		Doc:       "Replication factor of a topic created without one.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.DefaultReplicationFactor })},
	{Name: "num.partitions", BrokerName: "num.partitions",
		Type: TypeInt, Default: "1", Min: 1,
		Doc:       "Partition count of a topic created without one.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.NumPartitions })},
	{Name: "auto.create.topics.enable", BrokerName: "auto.create.topics.enable",
		Type: TypeBool, Default: "true",
		Doc:       "Create a topic a Kafka client's Metadata request names that does not exist, when the request allows it (v4+'s allow_auto_topic_creation; always before v4), with the controller's num.partitions and default.replication.factor; the caller needs Create on the topic or on Cluster, as for CreateTopics. Produce and Fetch never create.",
		setBroker: bBool(func(c *BrokerConfig) *bool { return &c.AutoCreateTopicsEnable })},
	{Name: "offsets.topic.num.partitions", BrokerName: "offsets.topic.num.partitions",
		Type: TypeInt, Default: "50", Min: 1,
		Doc:       "Partitions of __consumer_offsets when the controller creates it; fixed afterwards (a group's coordinator is chosen by it).",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.OffsetsTopicNumPartitions })},
	{Name: "offsets.topic.replication.factor", BrokerName: "offsets.topic.replication.factor",
		Type: TypeInt, Default: "3", Min: 1,
		Doc:       "Replication factor of __consumer_offsets, capped at the live brokers when it is created.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.OffsetsTopicReplicationFactor })},
	{Name: "offsets.retention.minutes", BrokerName: "offsets.retention.minutes",
		Type: TypeLong, Default: "10080", Min: 1,
		Doc:       "How long the committed offsets of a group without members are kept after it became empty (and after their last commit); a Stable consumer group keeps those of the topics it subscribes to. A commit that asks for a retention of its own (OffsetCommit v2-v4's retention_time_ms) expires that long after it instead.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.OffsetsRetentionMinutes })},
	{Name: "offsets.retention.check.interval.ms", BrokerName: "offsets.retention.check.interval.ms",
		Type: TypeLong, Default: "600000", Min: 1,
		Doc:       "How often the group coordinator expires committed offsets (offsets.retention.minutes) and forgets the groups that are Empty and have no offsets left, writing their tombstones; until then such a group is still listed and described, Empty.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.OffsetsRetentionCheckIntervalMs })},
	{Name: "offset.metadata.max.bytes", BrokerName: "offset.metadata.max.bytes",
		Type: TypeInt, Default: "4096", Min: 0,
		Doc:       "Largest metadata string an offset commit may carry (OFFSET_METADATA_TOO_LARGE above it).",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.OffsetMetadataMaxBytes })},
	{Name: "group.initial.rebalance.delay.ms", BrokerName: "group.initial.rebalance.delay.ms",
		Type: TypeLong, Default: "3000", Min: 0,
		Doc:       "How long the first rebalance of an empty group waits for more members to join.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.GroupInitialRebalanceDelayMs })},
	{Name: "group.min.session.timeout.ms", BrokerName: "group.min.session.timeout.ms",
		Type: TypeLong, Default: "6000", Min: 1,
		Doc:       "Smallest session timeout a member may ask for (INVALID_SESSION_TIMEOUT below it).",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.GroupMinSessionTimeoutMs })},
	{Name: "group.max.session.timeout.ms", BrokerName: "group.max.session.timeout.ms",
		Type: TypeLong, Default: "1800000", Min: 1,
		Doc:       "Largest session timeout a member may ask for (INVALID_SESSION_TIMEOUT above it).",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.GroupMaxSessionTimeoutMs })},
	{Name: "group.max.size", BrokerName: "group.max.size",
		Type: TypeInt, Default: "2147483647", Min: 1,
		Doc:       "Most members one group may have (GROUP_MAX_SIZE_REACHED above it).",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.GroupMaxSize })},
	{Name: "log.max.open.files", BrokerName: "log.max.open.files",
		Type: TypeInt, Default: "8192", Min: 16,
		Doc:       "Most segment files (.log, .index, .timeindex) the broker keeps open across all partitions; idle ones are closed least recently used first and reopened when next read or written (a tidemark option; Kafka holds one per segment).",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.LogMaxOpenFiles })},
	{Name: "log.follower.cached.bytes", BrokerName: "log.follower.cached.bytes", Dynamic: true,
		Type: TypeLong, Default: "67108864", Min: -1,
		Doc:       "How much of a follower replica's log, its latest bytes across its segments, stays in the page cache; older bytes, once written back, are dropped from it as the follower appends, so its next appends reuse those pages and the memory stays with the leaders' logs that consumers read. Consumers of a partition whose leader moves here read older bytes from disk once. -1 or 0 keeps every page, as Kafka does; less than 4 MiB counts as 4 MiB (a tidemark option).",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.LogFollowerCachedBytes })},
	{Name: "producer.id.expiration.ms", BrokerName: "producer.id.expiration.ms", Dynamic: true,
		Type: TypeInt, Default: "86400000", Min: 1,
		Doc:       "How long a partition leader keeps an idempotent producer's state (epoch, last sequences) after the producer's last batch; the expiry pass (log.retention.check.interval.ms) drops it then, and a producer not known sends its next batch from sequence 0.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ProducerIDExpirationMs })},
	{Name: "log.retention.check.interval.ms", BrokerName: "log.retention.check.interval.ms",
		Type: TypeLong, Default: "300000", Min: minRetentionCheckIntervalMs,
		Doc:       "How often the broker looks for segments retention.ms or retention.bytes lets it delete (and expires idle producer ids).",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.LogRetentionCheckIntervalMs })},
	{Name: "replica.high.watermark.checkpoint.interval.ms", BrokerName: "replica.high.watermark.checkpoint.interval.ms",
		Type: TypeLong, Default: "5000", Min: minRetentionCheckIntervalMs,
		Doc:       "How often the broker writes every partition's high watermark to each data directory's replication-offset-checkpoint, durably (fsync); a restarted broker starts its partitions from it.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.ReplicaHighWatermarkCheckpointIntervalMs })},
	{Name: "log.flush.offset.checkpoint.interval.ms", BrokerName: "log.flush.offset.checkpoint.interval.ms",
		Type: TypeLong, Default: "60000", Min: minRetentionCheckIntervalMs,
		Doc:       "How often the broker writes each data directory's recovery-point-offset-checkpoint and log-start-offset-checkpoint, durably (fsync); a restart after an unclean shutdown recovers each log from its recovery point.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.LogFlushOffsetCheckpointIntervalMs })},
	{Name: "log.flush.fsync.every.append", BrokerName: "log.flush.fsync.every.append",
		Type: TypeBool, Default: "false",
		Doc:       "fsync the log after every append, before acknowledging it (a tidemark option; Kafka relies on replication).",
		setBroker: bBool(func(c *BrokerConfig) *bool { return &c.LogFlushFsyncEveryAppend })},
	{Name: "log.cleaner.enable", BrokerName: "log.cleaner.enable",
		Type: TypeBool, Default: "true",
		Doc:       "Run the log cleaner, which compacts topics with cleanup.policy=compact.",
		setBroker: bBool(func(c *BrokerConfig) *bool { return &c.LogCleanerEnable })},
	{Name: "log.cleaner.threads", BrokerName: "log.cleaner.threads",
		Type: TypeInt, Default: "1", Min: 1, Max: 1,
		Doc:       "Cleaner goroutines; tidemark runs one.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.LogCleanerThreads })},
	{Name: "log.cleaner.backoff.ms", BrokerName: "log.cleaner.backoff.ms",
		Type: TypeLong, Default: "15000", Min: minRetentionCheckIntervalMs,
		Doc:       "How long the cleaner sleeps when no log needs cleaning.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.LogCleanerBackoffMs })},
	{Name: "log.cleaner.dedupe.buffer.size", BrokerName: "log.cleaner.dedupe.buffer.size",
		Type: TypeLong, Default: "134217728", Min: 1 << 10,
		Doc:       "Memory for the cleaner's key-to-offset map; a dirty section with more keys than fit is cleaned in several passes.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.LogCleanerDedupeBufferSize })},

	// Limits against a hostile or broken client.
	{Name: "fetch.max.bytes", BrokerName: "fetch.max.bytes", Dynamic: true,
		Type: TypeInt, Default: "57671680", Min: 1024,
		Doc:       "Most bytes one consumer fetch returns, whatever max_bytes it asks for (a larger first batch is still returned).",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.FetchMaxBytes })},
	{Name: "produce.max.records.per.request", BrokerName: "produce.max.records.per.request", Dynamic: true,
		Type: TypeInt, Default: "100000", Min: 1,
		Doc:       "Most records one produce request may hold, counted from batch headers or the encoded list before decoding; more gives RECORD_LIST_TOO_LARGE.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ProduceMaxRecordsPerRequest })},
	{Name: "request.timeout.max.ms", BrokerName: "request.timeout.max.ms", Dynamic: true,
		Type: TypeInt, Default: "300000", Min: 1,
		Doc:       "Largest timeout_ms a request may ask for; more gives INVALID_REQUEST.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.RequestTimeoutMaxMs })},
	{Name: "quota.producer.default", BrokerName: "quota.producer.default", Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 1,
		Doc:       "Produce byte rate (bytes/s) each principal may use before its answers are delayed (Kafka's producer_byte_rate default).",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.QuotaProducerDefault })},
	{Name: "quota.consumer.default", BrokerName: "quota.consumer.default", Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 1,
		Doc:       "Fetch byte rate (bytes/s) each principal may use before its answers are delayed (Kafka's consumer_byte_rate default).",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.QuotaConsumerDefault })},
	{Name: "quota.producer.overrides", BrokerName: "quota.producer.overrides", Dynamic: true,
		Type: TypeString, Default: "", Check: checkRateOverrides,
		Doc:       "Per-principal produce byte rates as principal:bytesPerSecond pairs, comma-separated, e.g. alice:1048576,ANONYMOUS:65536.",
		setBroker: bString(func(c *BrokerConfig) *string { return &c.QuotaProducerOverrides })},
	{Name: "quota.consumer.overrides", BrokerName: "quota.consumer.overrides", Dynamic: true,
		Type: TypeString, Default: "", Check: checkRateOverrides,
		Doc:       "Per-principal fetch byte rates as principal:bytesPerSecond pairs, comma-separated.",
		setBroker: bString(func(c *BrokerConfig) *string { return &c.QuotaConsumerOverrides })},
	{Name: "leader.replication.throttled.rate", BrokerName: "leader.replication.throttled.rate", Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 1,
		Doc:       "Bytes/s this broker sends as leader to followers of throttled replicas (leader.replication.throttled.replicas) that are not in the ISR.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.LeaderReplicationThrottledRate })},
	{Name: "follower.replication.throttled.rate", BrokerName: "follower.replication.throttled.rate", Dynamic: true,
		Type: TypeLong, Default: maxLong, Min: 1,
		Doc:       "Bytes/s this broker fetches as follower for throttled replicas (follower.replication.throttled.replicas) that have not caught up.",
		setBroker: bInt64(func(c *BrokerConfig) *int64 { return &c.FollowerReplicationThrottledRate })},
	{Name: "replication.quota.window.num", BrokerName: "replication.quota.window.num",
		Type: TypeInt, Default: "11", Min: 2, Max: MaxQuotaWindowNum,
		Doc:       "Samples kept to measure the replication throttles' byte rates; at most 100 (see quota.window.num).",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ReplicationQuotaWindowNum })},
	{Name: "replication.quota.window.size.seconds", BrokerName: "replication.quota.window.size.seconds",
		Type: TypeInt, Default: "1", Min: 1,
		Doc:       "Length of one sample of the replication throttles' byte rates.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.ReplicationQuotaWindowSizeSeconds })},
	{Name: "quota.window.num", BrokerName: "quota.window.num",
		Type: TypeInt, Default: "11", Min: 2, Max: MaxQuotaWindowNum,
		Doc: "Samples kept to measure a principal's byte rate; at most 100, where Kafka has no maximum: " +
			"every principal measured keeps this many per quota kind, allocated when it is first measured, " +
			"so a mistyped count would take the broker's memory. A longer window is quota.window.size.seconds.",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.QuotaWindowNum })},
	{Name: "quota.window.size.seconds", BrokerName: "quota.window.size.seconds",
		Type: TypeInt, Default: "1", Min: 1,
		Doc:       "Length of one byte-rate sample; the longest throttle is quota.window.num samples, and at most 2^31-1 ms (what throttle_time_ms carries).",
		setBroker: bInt32(func(c *BrokerConfig) *int32 { return &c.QuotaWindowSizeSeconds })},
}

// MaxQuotaWindowNum is the most samples quota.window.num and
// replication.quota.window.num may ask for: each measured rate allocates
// them up front, one rate per principal and quota kind.
const MaxQuotaWindowNum = 100

// Indexes over defs, by topic-level key and by broker-level key.
var (
	byTopicName  = map[string]*Def{}
	byBrokerName = map[string]*Def{}
)

func init() {
	for i := range defs {
		d := &defs[i]
		if d.Max == 0 {
			d.Max = typeMax(d.Type)
		}
		if d.TopicLevel {
			byTopicName[d.Name] = d
		}
		if d.BrokerName != "" {
			byBrokerName[d.BrokerName] = d
		}
	}
	sortedDefs = slices.Clone(defs)
	slices.SortFunc(sortedDefs, func(a, b Def) int { return cmp.Compare(a.Name, b.Name) })
}

func typeMax(t Type) int64 {
	switch t {
	case TypeInt:
		return math.MaxInt32
	case TypeLong:
		return math.MaxInt64
	}
	return 0
}

func tInt32(f func(*TopicConfig) *int32) func(*TopicConfig, value) {
	return func(c *TopicConfig, v value) { *f(c) = int32(v.i) }
}

func tInt64(f func(*TopicConfig) *int64) func(*TopicConfig, value) {
	return func(c *TopicConfig, v value) { *f(c) = v.i }
}

func tBool(f func(*TopicConfig) *bool) func(*TopicConfig, value) {
	return func(c *TopicConfig, v value) { *f(c) = v.b }
}

func tString(f func(*TopicConfig) *string) func(*TopicConfig, value) {
	return func(c *TopicConfig, v value) { *f(c) = v.s }
}

func bInt32(f func(*BrokerConfig) *int32) func(*BrokerConfig, value) {
	return func(c *BrokerConfig, v value) { *f(c) = int32(v.i) }
}

func bInt64(f func(*BrokerConfig) *int64) func(*BrokerConfig, value) {
	return func(c *BrokerConfig, v value) { *f(c) = v.i }
}

func bBool(f func(*BrokerConfig) *bool) func(*BrokerConfig, value) {
	return func(c *BrokerConfig, v value) { *f(c) = v.b }
}

func bString(f func(*BrokerConfig) *string) func(*BrokerConfig, value) {
	return func(c *BrokerConfig, v value) { *f(c) = v.s }
}

// checkCompressionType accepts only producer: the broker stores batches as
// sent. Kafka's other values (recompress to one codec) are refused by name,
// so a config copied from Kafka fails loudly instead of being ignored.
func checkCompressionType(s string) error {
	switch s {
	case CompressionProducer:
		return nil
	case "uncompressed", "gzip", "snappy", "lz4", "zstd":
		return fmt.Errorf("%q is not supported: tidemark keeps batches as the producer compressed them; use producer", s)
	}
	return fmt.Errorf("%q is not a compression type; use producer", s)
}

// checkCleanupPolicy refuses an empty cleanup.policy: a log must be cleaned
// one way or the other.
func checkCleanupPolicy(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("value is empty; use delete, compact or compact,delete")
	}
	return nil
}

// normalisePolicy orders and deduplicates cleanup.policy's elements.
func normalisePolicy(l []string) string {
	var out []string
	for _, p := range []string{CleanupCompact, CleanupDelete} {
		if slices.Contains(l, p) {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}

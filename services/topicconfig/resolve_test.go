package topicconfig

import (
	"math"
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestDefaultTopic(t *testing.T) {
	want := TopicConfig{
		MinInsyncReplicas:           1,
		UncleanLeaderElectionEnable: false,
		RetentionMs:                 604800000,
		RetentionBytes:              Unlimited,
		SegmentBytes:                1073741824,
		SegmentMs:                   604800000,
		MaxMessageBytes:             1048588,
		FlushMessages:               math.MaxInt64,
		FlushMs:                     math.MaxInt64,
		IndexIntervalBytes:          4096,
		MessageTimestampBeforeMaxMs: math.MaxInt64,
		MessageTimestampAfterMaxMs:  math.MaxInt64,
		CleanupPolicy:               "delete",
		MinCleanableDirtyRatio:      0.5,
		DeleteRetentionMs:           86400000,
		MaxCompactionLagMs:          math.MaxInt64,
		CompressionType:             "producer",
	}
	if got := DefaultTopic(); got != want {
		t.Fatalf("DefaultTopic() = %+v\nwant %+v", got, want)
	}
}

func TestDefaultBroker(t *testing.T) {
	want := BrokerConfig{
		TopicDefaults:                            DefaultTopic(),
		ReplicaLagTimeMaxMs:                      30000,
		ReplicaFetchWaitMaxMs:                    500,
		ReplicaFetchMinBytes:                     1,
		ReplicaFetchMaxBytes:                     1048576,
		ReplicaFetchResponseMaxBytes:             10485760,
		NumReplicaFetchers:                       1,
		AutoLeaderRebalanceEnable:                true,
		LeaderImbalancePerBrokerPercentage:       10,
		LeaderImbalanceCheckIntervalSeconds:      300,
		ReplicaTruncationMode:                    TruncateByLeaderEpoch,
		DefaultReplicationFactor:                 1,
		NumPartitions:                            1,
		AutoCreateTopicsEnable:                   true,
		LogFlushFsyncEveryAppend:                 false,
		LogRetentionCheckIntervalMs:              300000,
		ReplicaHighWatermarkCheckpointIntervalMs: 5000,
		LogFlushOffsetCheckpointIntervalMs:       60000,
		LogMaxOpenFiles:                          8192,
		LogFollowerCachedBytes:                   64 << 20,
		ProducerIDExpirationMs:                   86400000,
		LogCleanerEnable:                         true,
		LogCleanerThreads:                        1,
		LogCleanerBackoffMs:                      15000,
		LogCleanerDedupeBufferSize:               128 << 20,
		OffsetsTopicNumPartitions:                50,
		OffsetsTopicReplicationFactor:            3,
		OffsetsRetentionMinutes:                  10080,
		OffsetsRetentionCheckIntervalMs:          600000,
		OffsetMetadataMaxBytes:                   4096,
		GroupInitialRebalanceDelayMs:             3000,
		GroupMinSessionTimeoutMs:                 6000,
		GroupMaxSessionTimeoutMs:                 1800000,
		GroupMaxSize:                             math.MaxInt32,
		FetchMaxBytes:                            57671680,
		ProduceMaxRecordsPerRequest:              100000,
		RequestTimeoutMaxMs:                      300000,
		QuotaProducerDefault:                     math.MaxInt64,
		QuotaConsumerDefault:                     math.MaxInt64,
		QuotaWindowNum:                           11,
		QuotaWindowSizeSeconds:                   1,
		LeaderReplicationThrottledRate:           math.MaxInt64,
		FollowerReplicationThrottledRate:         math.MaxInt64,
		ReplicationQuotaWindowNum:                11,
		ReplicationQuotaWindowSizeSeconds:        1,
	}
	if got := DefaultBroker(); got != want {
		t.Fatalf("DefaultBroker() = %+v\nwant %+v", got, want)
	}
}

func TestResolvePrecedence(t *testing.T) {
	perBroker := map[string]string{"log.retention.ms": "3000", "min.insync.replicas": "3"}
	cluster := map[string]string{"log.retention.ms": "2000", "log.roll.ms": "2000", "unclean.leader.election.enable": "true"}
	static := map[string]string{"log.retention.ms": "1000", "log.roll.ms": "1000", "log.segment.bytes": "1000000",
		"replica.lag.time.max.ms": "5000"} // broker-only keys are allowed and ignored
	topic := map[string]string{"min.insync.replicas": "2"}

	c, err := Resolve(topic, perBroker, cluster, static)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want int64
	}{
		{"topic override beats every broker layer", int64(c.MinInsyncReplicas), 2},
		{"first broker layer beats later ones", c.RetentionMs, 3000},
		{"second layer beats third", c.SegmentMs, 2000},
		{"last layer beats default", int64(c.SegmentBytes), 1000000},
		{"default when no layer sets it", int64(c.IndexIntervalBytes), 4096},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %d, want %d", ch.name, ch.got, ch.want)
		}
	}
	if !c.UncleanLeaderElectionEnable {
		t.Error("unclean.leader.election.enable from the cluster layer was lost")
	}

	entries, err := Describe(topic, perBroker, cluster, static)
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]Entry{}
	for _, e := range entries {
		src[e.Name] = e
	}
	for name, want := range map[string]Entry{
		"min.insync.replicas":  {Name: "min.insync.replicas", Value: "2", Source: SourceTopic},
		"retention.ms":         {Name: "retention.ms", Value: "3000", Source: SourceBroker, Layer: 0},
		"segment.ms":           {Name: "segment.ms", Value: "2000", Source: SourceBroker, Layer: 1},
		"segment.bytes":        {Name: "segment.bytes", Value: "1000000", Source: SourceBroker, Layer: 2},
		"index.interval.bytes": {Name: "index.interval.bytes", Value: "4096", Source: SourceDefault},
	} {
		if src[name] != want {
			t.Errorf("Describe %s = %+v, want %+v", name, src[name], want)
		}
	}
	if len(entries) != len(byTopicName) {
		t.Errorf("Describe lists %d settings, want every topic-level one (%d)", len(entries), len(byTopicName))
	}
}

func TestResolveRejects(t *testing.T) {
	tests := []struct {
		name   string
		topic  map[string]string
		broker map[string]string
		key    string
	}{
		{"broker key as topic override", map[string]string{"log.retention.ms": "1"}, nil, "log.retention.ms"},
		{"topic key in a broker layer", nil, map[string]string{"retention.ms": "1"}, "retention.ms"},
		{"invalid topic value", map[string]string{"segment.bytes": "10"}, nil, "segment.bytes"},
		{"invalid broker value", nil, map[string]string{"log.segment.bytes": "x"}, "log.segment.bytes"},
	}
	for _, tt := range tests {
		_, err := Resolve(tt.topic, tt.broker)
		if e := kerr.As(err); e == nil || e.Code != kerr.InvalidConfig || e.Field != tt.key {
			t.Errorf("%s: err = %v, want INVALID_CONFIG on %s", tt.name, err, tt.key)
		}
	}
}

func TestResolveBroker(t *testing.T) {
	c, err := ResolveBroker(
		map[string]string{"num.replica.fetchers": "4", "log.retention.ms": "10", "log.max.open.files": "15000"},
		map[string]string{"num.replica.fetchers": "2", "replica.truncation.mode": "high-watermark"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumReplicaFetchers != 4 || c.ReplicaTruncationMode != TruncateByHighWatermark || c.TopicDefaults.RetentionMs != 10 || c.LogMaxOpenFiles != 15000 {
		t.Fatalf("ResolveBroker = %+v", c)
	}
	if c.ReplicaLagTimeMaxMs != 30000 {
		t.Fatalf("default replica.lag.time.max.ms lost: %d", c.ReplicaLagTimeMaxMs)
	}

	_, err = ResolveBroker(map[string]string{"replica.lag.time.max.ms": "400"})
	if e := kerr.As(err); e == nil || e.Field != "replica.fetch.wait.max.ms" || !strings.Contains(e.Message, "400") {
		t.Fatalf("fetch wait above lag time: err = %v", err)
	}
	if _, err := ResolveBroker(map[string]string{"replica.lag.time.max.ms": "500"}); err != nil {
		t.Fatalf("fetch wait equal to lag time must be allowed: %v", err)
	}
}

func TestResolveCleanupPolicy(t *testing.T) {
	for raw, want := range map[string]string{"delete": "delete", "compact": "compact", "delete,compact": "compact,delete", "compact,compact": "compact"} {
		tc, err := Resolve(map[string]string{"cleanup.policy": raw})
		if err != nil || tc.CleanupPolicy != want {
			t.Errorf("cleanup.policy=%q resolved to %q, %v; want %q", raw, tc.CleanupPolicy, err, want)
		}
	}
	tc, _ := Resolve(map[string]string{"cleanup.policy": "compact,delete"})
	if !tc.Compact() || !tc.Delete() {
		t.Errorf("compact,delete: Compact()=%v Delete()=%v", tc.Compact(), tc.Delete())
	}
	if tc := DefaultTopic(); tc.Compact() || !tc.Delete() {
		t.Errorf("default policy %q is not delete only", tc.CleanupPolicy)
	}
}

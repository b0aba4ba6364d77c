package ctrl

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/metastore"
)

// A config put into etcd behind tidemark's back may hold a key that is not
// valid (Kafka's log.retention.hours, which tidemark does not know, or a
// value out of range). Only that key is ignored, with one warning: every
// other setting still reaches the brokers. Falling back to the defaults for
// the whole topic turned a compacted topic into a deleting one and lowered
// min.insync.replicas, and a bad cluster-wide key did it to every topic.
func TestAnInvalidConfigKeyInEtcdIsIgnoredAlone(t *testing.T) {
	var logs bytes.Buffer
	c := newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.NewTextHandler(&logs, nil)), policy{}, nil)
	tp := &topic{name: "t", config: map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2", "segment.bytes": "12"}}
	c.topics["t"] = tp
	c.brokerConfigs[metastore.DefaultBrokerEntity] = map[string]string{"log.retention.hours": "1", "log.retention.ms": "60000"}

	for range 3 {
		got := c.topicConfigMap(tp, 1)
		if got["cleanup.policy"] != "compact" || got["min.insync.replicas"] != "2" || got["retention.ms"] != "60000" {
			t.Fatalf("effective config %v: want the valid overrides kept (compact, min.insync.replicas 2, retention.ms 60000)", got)
		}
		if got["segment.bytes"] == "12" {
			t.Fatalf("the out-of-range segment.bytes reached the brokers: %v", got)
		}
	}
	if tc := c.topicConfig(tp); !tc.Compact() || tc.MinInsyncReplicas != 2 || tc.RetentionMs != 60000 {
		t.Fatalf("the controller's view of t: %+v", tc)
	}
	if bc := c.brokerConfigsFor(1); bc["log.retention.ms"] != "60000" || bc["log.retention.hours"] != "" {
		t.Fatalf("the dynamic broker config sent: %v", bc)
	}
	if n := strings.Count(logs.String(), "segment.bytes"); n != 1 {
		t.Fatalf("warned of segment.bytes %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "log.retention.hours") {
		t.Fatalf("no warning names log.retention.hours:\n%s", logs.String())
	}
}

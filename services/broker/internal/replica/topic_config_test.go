package replica

import (
	"testing"
	"time"

	"tidemark.io/services/topicconfig"
)

// max.message.bytes=0 is a value the registry accepts (Kafka's atLeast(0))
// at CreateTopics and AlterConfigs, so the controller sends it to the
// brokers. The broker must host the partition with it (every batch then
// too large), not refuse the whole log config.
func TestMaxMessageBytesZeroIsHosted(t *testing.T) {
	if err := topicconfig.Validate(topicconfig.ScopeTopic, "max.message.bytes", "0"); err != nil {
		t.Skipf("the registry refuses max.message.bytes=0 now: %v", err)
	}
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, map[string]string{"max.message.bytes": "0"})
	if _, ok := e.m.Replica(tp0); !ok {
		t.Fatal("the partition is not hosted")
	}
}

// A value that the registry accepts but the log refuses, set dynamically,
// must not freeze the topic's other dynamic configs: after
// max.message.bytes=0 is set, a later retention.ms change must still reach
// the log.
func TestOneRefusedLogValueBlocksEveryLaterConfigChange(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, map[string]string{})
	r, ok := e.m.Replica(tp0)
	if !ok {
		t.Fatal("not hosted")
	}
	e.configUpdate(map[string]map[string]string{tp0.Topic: {"max.message.bytes": "0"}}, nil)
	e.configUpdate(map[string]map[string]string{tp0.Topic: {"max.message.bytes": "0", "retention.ms": "60000"}}, nil)
	if got := r.Log().Config().RetentionMs; got != time.Minute {
		t.Fatalf("retention.ms changed to 60000 but the log's retention is %v", got)
	}
}

// flush.ms=0 asks for every record to be flushed at the next check, as
// Kafka's flush scheduler does; it must not turn into "never flush", which
// is what the log store reads an interval of 0 as.
func TestFlushMsZeroFlushesAtEveryCheck(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, map[string]string{"flush.ms": "0"})
	r, ok := e.m.Replica(tp0)
	if !ok {
		t.Fatal("not hosted")
	}
	if got := r.Log().Config().FlushInterval; got <= 0 {
		t.Fatalf("flush.ms=0 gave the log a flush interval of %v: never flushed", got)
	}
	e.configUpdate(map[string]map[string]string{tp0.Topic: {"flush.ms": "250"}}, nil)
	if got := r.Log().Config().FlushInterval; got != 250*time.Millisecond {
		t.Fatalf("flush.ms=250: interval %v", got)
	}
}

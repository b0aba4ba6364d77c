package ctrl

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/controller/internal/placement"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// A broker started with --config log.retention.ms=60000 (a topic default,
// Kafka's server.properties synonym) registers it as a static config, and
// DescribeConfigs of that broker shows it as STATIC_BROKER_CONFIG. The
// topic configs the controller sends that broker must then carry 60000 for
// a topic without its own retention.ms: the controller sends every key's
// effective value, so what it sends is what the broker runs with (the
// broker's own static layer never wins over a key the controller sent).
func TestBrokerStaticTopicDefaultsReachItsReplicas(t *testing.T) {
	c := newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.DiscardHandler), policy{}, nil)
	tp := &topic{name: "t"}
	c.topics["t"] = tp
	c.seen[2] = metastore.BrokerInfo{ID: 2, StaticConfigs: map[string]string{"log.retention.ms": "60000", "min.insync.replicas": "2"}}
	got := c.topicConfigMap(tp, 2)
	if got["retention.ms"] != "60000" || got["min.insync.replicas"] != "2" {
		t.Fatalf("topic configs for broker 2: retention.ms=%s min.insync.replicas=%s; want broker 2's static 60000 and 2",
			got["retention.ms"], got["min.insync.replicas"])
	}
	// A per-broker dynamic value still wins over the static one.
	c.brokerConfigs[metastore.BrokerEntity(2)] = map[string]string{"log.retention.ms": "1000"}
	if got := c.topicConfigMap(tp, 2); got["retention.ms"] != "1000" {
		t.Fatalf("retention.ms=%s, want the dynamic per-broker 1000", got["retention.ms"])
	}
}

// setupScript runs datadriven setup commands (broker, partition) on h.
func (h *harness) setupScript(t *testing.T, script string) {
	h.t = t
	datadriven.RunTestFromString(t, script, func(t *testing.T, d *datadriven.TestData) string {
		h.t = t
		out, err := h.run(d)
		if err != nil {
			t.Fatalf("%s: %v", d.Cmd, err)
		}
		if len(out) == 0 {
			return "ok\n"
		}
		return strings.Join(out, "\n") + "\n"
	})
}

const twoBrokerSetup = `
broker id=1 epoch=10
----
ok

broker id=2 epoch=11
----
ok

broker id=3 epoch=12 shutting
----
ok

partition t/0 replicas=(1,2) leader=1 le=0 isr=(1,2) pe=0
----
ok
`

// placement.MaxPartitions bounds one topic's partition count ("an absurd
// count is refused rather than attempted"); CreateTopics enforces it, but
// CreatePartitions only bounds the number added in one call, so a topic
// grows past it (here to 10001 in one call; repeated calls without end).
func TestCreatePartitionsRespectsMaxPartitions(t *testing.T) {
	h := newHarness()
	h.setupScript(t, twoBrokerSetup)
	var got *adminv1.CreatePartitionsResponse
	h.c.handle(evCreatePartitions{req: &adminv1.CreatePartitionsRequest{ValidateOnly: true,
		Topics: []*adminv1.CreatePartitionsTopic{{Name: "t", Count: 10001}}},
		reply: func(m any, err error) {
			if a, ok := m.(partitionsAnswer); ok {
				got = a.resp
			}
		}})
	h.effects()
	if got == nil {
		t.Fatal("no answer")
	}
	if c := kerr.Code(got.GetResults()[0].GetErrorCode()); c != kerr.InvalidPartitions {
		t.Fatalf("growing t to 10001 partitions (MaxPartitions %d): %v %s, want INVALID_PARTITIONS",
			placement.MaxPartitions, c, got.GetResults()[0].GetErrorMessage())
	}
}

// validate_only must answer what the real request would: an explicit
// assignment naming only a broker in controlled shutdown is refused by the
// real CreateTopics (no live replica), so the validation must refuse it too.
func TestCreateTopicsValidateOnlyAgreesWithTheCreation(t *testing.T) {
	h := newHarness()
	h.setupScript(t, twoBrokerSetup)
	create := func(validate bool) *adminv1.CreateTopicsResponse {
		var got *adminv1.CreateTopicsResponse
		h.c.handle(evCreateTopics{req: &adminv1.CreateTopicsRequest{ValidateOnly: validate,
			Topics: []*adminv1.TopicSpec{{Name: "a", Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{3}}}}}},
			reply: func(m any, err error) {
				if a, ok := m.(createAnswer); ok {
					got = a.resp
				}
			}})
		eff := h.effects()
		if got == nil {
			t.Fatalf("no answer (validate=%v); effects %v", validate, eff)
		}
		return got
	}
	real := create(false).GetResults()[0]
	val := create(true).GetResults()[0]
	if real.GetErrorCode() != val.GetErrorCode() {
		t.Fatalf("validate_only answered %v %q, the creation %v %q",
			kerr.Code(val.GetErrorCode()), val.GetErrorMessage(), kerr.Code(real.GetErrorCode()), real.GetErrorMessage())
	}
}

// __consumer_offsets is protected: clients may not create or delete it, and
// its partition count is fixed once created (a group's coordinator is
// PartitionFor(group, N)). CreatePartitions on it must be refused; growing
// it moves most groups to partitions that hold none of their offsets.
func TestCreatePartitionsRefusesTheOffsetsTopic(t *testing.T) {
	h := newHarness()
	h.setupScript(t, twoBrokerSetup+`
partition __consumer_offsets/0 replicas=(1,2) leader=1 le=0 isr=(1,2) pe=0
----
ok
`)
	var got *adminv1.CreatePartitionsResponse
	h.c.handle(evCreatePartitions{req: &adminv1.CreatePartitionsRequest{ValidateOnly: true,
		Topics: []*adminv1.CreatePartitionsTopic{{Name: OffsetsTopic, Count: 2}}},
		reply: func(m any, err error) {
			if a, ok := m.(partitionsAnswer); ok {
				got = a.resp
			}
		}})
	h.effects()
	if got == nil {
		t.Fatal("no answer")
	}
	if got.GetResults()[0].GetErrorCode() == 0 {
		t.Fatalf("CreatePartitions on %s was accepted: %v", OffsetsTopic, got.GetResults()[0].GetAssignments())
	}
}

// Kafka refuses a topic whose effective min.compaction.lag.ms exceeds its
// max.compaction.lag.ms (LogConfig.validateValues: "conflict topic config
// setting min.compaction.lag.ms (X) > max.compaction.lag.ms (Y)"), at
// CreateTopics and at (Incremental)AlterConfigs. Each key alone is valid,
// so checking keys one at a time lets the conflict through.
func TestCompactionLagConflictIsRefused(t *testing.T) {
	h := newHarness()
	h.setupScript(t, twoBrokerSetup)
	var got *adminv1.CreateTopicsResponse
	h.c.handle(evCreateTopics{req: &adminv1.CreateTopicsRequest{ValidateOnly: true,
		Topics: []*adminv1.TopicSpec{{Name: "a", NumPartitions: 1, ReplicationFactor: 1,
			Configs: map[string]string{"min.compaction.lag.ms": "10000", "max.compaction.lag.ms": "1000"}}}},
		reply: func(m any, err error) {
			if a, ok := m.(createAnswer); ok {
				got = a.resp
			}
		}})
	h.effects()
	if got == nil {
		t.Fatal("no answer")
	}
	if c := kerr.Code(got.GetResults()[0].GetErrorCode()); c != kerr.InvalidConfig {
		t.Errorf("CreateTopics min.compaction.lag.ms=10000 max.compaction.lag.ms=1000: %v, want INVALID_CONFIG", c)
	}

	var alt *adminv1.AlterConfigsResponse
	h.c.handle(evAlterConfigs{req: &adminv1.AlterConfigsRequest{ValidateOnly: true,
		Resources: []*adminv1.AlterConfigsResource{{
			Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"},
			Ops:      []*adminv1.ConfigOp{{Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET, Name: "max.compaction.lag.ms", Value: "1"}, {Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET, Name: "min.compaction.lag.ms", Value: "5"}}}}},
		reply: func(m any, err error) {
			if a, ok := m.(*adminv1.AlterConfigsResponse); ok {
				alt = a
			}
		}})
	h.effects()
	if alt == nil {
		t.Fatal("no AlterConfigs answer")
	}
	if c := kerr.Code(alt.GetResults()[0].GetErrorCode()); c != kerr.InvalidConfig {
		t.Errorf("AlterConfigs min.compaction.lag.ms=5 max.compaction.lag.ms=1: %v, want INVALID_CONFIG", c)
	}
}

// A replacing alteration (Kafka's AlterConfigs) is the resource's whole
// set: keys it does not name are removed in the same write, and a DELETE
// op in it is refused.
func TestReplacingAlterationIsTheWholeSet(t *testing.T) {
	c := newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.DiscardHandler), policy{}, nil)
	c.topics["t"] = &topic{name: "t", config: map[string]string{"retention.ms": "1000", "segment.ms": "60000"}}
	res := &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"}
	set := &adminv1.ConfigOp{Name: "min.insync.replicas", Value: "2", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}
	next, _, _, err := c.nextConfig(&adminv1.AlterConfigsResource{Resource: res, Replace: true, Ops: []*adminv1.ConfigOp{set}})
	if err != nil || len(next) != 1 || next["min.insync.replicas"] != "2" {
		t.Fatalf("whole set {min.insync.replicas=2}: %v %v, want only min.insync.replicas=2", next, err)
	}
	del := &adminv1.ConfigOp{Name: "retention.ms", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE}
	if _, _, _, err := c.nextConfig(&adminv1.AlterConfigsResource{Resource: res, Replace: true, Ops: []*adminv1.ConfigOp{set, del}}); kerr.As(err).Code != kerr.InvalidRequest {
		t.Fatalf("a DELETE in a whole set: %v, want INVALID_REQUEST", err)
	}
	// Without replace the other overrides stay.
	next, _, _, err = c.nextConfig(&adminv1.AlterConfigsResource{Resource: res, Ops: []*adminv1.ConfigOp{set}})
	if err != nil || len(next) != 3 {
		t.Fatalf("incremental SET: %v %v, want three overrides", next, err)
	}
}

// Synonyms list every layer setting a config, highest first, ending with
// the default; a topic's own override comes under its topic-level name,
// the broker layers under the broker-level name (Kafka's order).
func TestSynonymsInKafkasOrder(t *testing.T) {
	d, _ := lookupTopicDef(t, "retention.ms")
	layers := []synonymLayer{
		{map[string]string{"retention.ms": "1"}, adminv1.ConfigSource_CONFIG_SOURCE_TOPIC, true},
		{map[string]string{"log.retention.ms": "2"}, adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER, false},
		{nil, adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER, false},
		{map[string]string{"log.retention.ms": "4", "retention.ms": "x"}, adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG, false},
		{map[string]string{}, adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT, false},
	}
	var got []string
	for _, s := range synonyms(d, layers) {
		got = append(got, s.GetName()+"="+s.GetValue()+"/"+s.GetSource().String())
	}
	want := "retention.ms=1/CONFIG_SOURCE_TOPIC log.retention.ms=2/CONFIG_SOURCE_DYNAMIC_BROKER log.retention.ms=4/CONFIG_SOURCE_STATIC_BROKER_CONFIG log.retention.ms=604800000/CONFIG_SOURCE_DEFAULT"
	if strings.Join(got, " ") != want {
		t.Fatalf("synonyms %v, want %s", got, want)
	}
	// The controller's settings, reported as the default, stand for it.
	layers[4].m = map[string]string{"log.retention.ms": "5"}
	if s := synonyms(d, layers[3:]); len(s) != 2 || s[1].GetValue() != "5" {
		t.Fatalf("synonyms under the controller's settings: %v, want static 4 then default 5", s)
	}
}

func lookupTopicDef(t *testing.T, name string) (topicconfig.Def, bool) {
	t.Helper()
	d, ok := topicconfig.Lookup(topicconfig.ScopeTopic, name)
	if !ok {
		t.Fatalf("no topic config %s", name)
	}
	return d, ok
}

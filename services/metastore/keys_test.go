package metastore

import "testing"

func TestKeyLayoutRoundTrips(t *testing.T) {
	k := keys{p: "/tm"}
	cases := []struct {
		key  string
		want keyInfo
	}{
		{k.controller(), keyInfo{Kind: KindController}},
		{k.controllerEpoch(), keyInfo{Kind: KindControllerEpoch}},
		{k.broker(12), keyInfo{Kind: KindBroker, BrokerID: 12}},
		{k.topic("a.b"), keyInfo{Kind: KindTopic, Topic: "a.b"}},
		{k.partitionState("a", 7), keyInfo{Kind: KindPartitionState, Topic: "a", Partition: 7}},
		{k.topicConfig("a"), keyInfo{Kind: KindTopicConfig, Topic: "a"}},
		{k.brokerConfig("3"), keyInfo{Kind: KindBrokerConfig, Entity: "3", BrokerID: 3}},
		{k.brokerConfig(DefaultBrokerEntity), keyInfo{Kind: KindBrokerConfig, Entity: DefaultBrokerEntity, BrokerID: -1}},
		{k.topicDeletion("a"), keyInfo{Kind: KindTopicDeletion, Topic: "a"}},
		{k.producerIDBlock(), keyInfo{Kind: KindProducerIDBlock}},
		{k.controllerNode(2), keyInfo{Kind: KindControllerNode, BrokerID: 2}},
		{k.clusterID(), keyInfo{Kind: KindClusterID}},
		{"/tm/controllers/x", keyInfo{}},
		{"/tm/brokers/ids/x", keyInfo{}},
		{"/other/controller", keyInfo{}},
		{"/tm/brokers/topics/a/partitions/1/other", keyInfo{}},
	}
	for _, c := range cases {
		if got := k.parse(c.key); got != c.want {
			t.Errorf("parse(%q) = %+v, want %+v", c.key, got, c.want)
		}
	}
	if k.partitionState("a", 7) != "/tm/brokers/topics/a/partitions/7/state" {
		t.Errorf("partition key = %s", k.partitionState("a", 7))
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(nil, Options{Prefix: "tidemark"}); err == nil {
		t.Error("relative prefix accepted")
	}
	if _, err := New(nil, Options{MaxTxnOps: 3}); err == nil {
		t.Error("tiny MaxTxnOps accepted")
	}
	s, err := New(nil, Options{Prefix: "/x/"})
	if err != nil || s.Prefix() != "/x" {
		t.Errorf("prefix = %q, %v", s.Prefix(), err)
	}
}

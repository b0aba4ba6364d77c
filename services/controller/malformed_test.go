package controller

import (
	"context"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/metastore"
)

// A broker may write its own registration key (BrokerOwnRole), so a broker
// of another version, or a hand edit, can leave a value that does not
// decode. The watch ignores such a value; the load fails on it, so every
// term ends as it begins and no controller ever works.
func TestMalformedBrokerRegistrationDoesNotWedgeTheController(t *testing.T) {
	c := newCluster(t)
	if _, err := c.etcd.Client(t).Put(context.Background(), "/tidemark/brokers/ids/7", `{"id":"seven"}`); err != nil {
		t.Fatal(err)
	}
	c1 := c.startController(1)
	c.waitActive(c1, 8*time.Second)
}

// The controllers/<id> key is informational (DescribeCluster's standby
// list); a value there that does not decode must not stop every term.
func TestMalformedControllerNodeDoesNotWedgeTheController(t *testing.T) {
	c := newCluster(t)
	if _, err := c.etcd.Client(t).Put(context.Background(), "/tidemark/controllers/9", `not json`); err != nil {
		t.Fatal(err)
	}
	c1 := c.startController(1)
	c.waitActive(c1, 8*time.Second)
}

// A topic whose assignment names no partitions (written behind tidemark's
// back) loads as a topic of 0 partitions; CreatePartitions on it indexes
// t.parts[0] on the event loop and the panic kills the controller process.
func TestCreatePartitionsOnATopicWithoutPartitionsDoesNotPanic(t *testing.T) {
	c := newCluster(t)
	if _, err := c.etcd.Client(t).Put(context.Background(), "/tidemark/brokers/topics/empty",
		`{"version":1,"topic_id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":{}}`); err != nil {
		t.Fatal(err)
	}
	c1 := c.startController(1)
	c.waitActive(c1, 8*time.Second)
	c.startBrokers(c1, 3)
	resp, err := c.admin(c1).CreatePartitions(ctx(t), &adminv1.CreatePartitionsRequest{
		Topics: []*adminv1.CreatePartitionsTopic{{Name: "empty", Count: 2}}, TimeoutMs: 5000})
	t.Logf("CreatePartitions: %v %v", resp, err)
	if _, ok := c1.Active(); !ok {
		t.Fatal("controller not active after CreatePartitions")
	}
}

// A topic key whose name is not a legal topic name (a hand edit) loads like
// any topic, but every partition-state write naming it is refused by
// checkTopic (INVALID_TOPIC_EXCEPTION), and a failed state write ends the
// term. Here its partition has no state yet: each load tries to initialise
// it with the live broker, fails, and ends the term: no controller works.
func TestIllegalTopicNameInEtcdDoesNotWedgeTheController(t *testing.T) {
	c := newCluster(t)
	c.startBroker(1, "")
	if _, err := c.etcd.Client(t).Put(context.Background(), "/tidemark/brokers/topics/bad!name",
		`{"version":1,"topic_id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":{"0":[1]}}`); err != nil {
		t.Fatal(err)
	}
	c1 := c.startController(1)
	c.waitActive(c1, 8*time.Second)
}

// keys.parse reads the id of brokers/ids/<id> with strconv.ParseInt, which
// also takes "01" and "+1": a stray key under another spelling (a hand
// edit, a restore) is taken as a newer registration of broker 1, and the
// live broker 1 is declared failed ("replaced by a newer registration"):
// its leaderships move although it is registered and serving.
func TestNonCanonicalBrokerKeyIsNotTakenForALiveBroker(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 2)
	c.createTopic(c1, "t", [][]int32{{1, 2}}, nil)
	c.waitState("t", 0, 5*time.Second, "led by 1", func(s metastore.PartitionState) bool { return s.Leader == 1 && len(s.ISR) == 2 })
	if _, err := c.etcd.Client(t).Put(context.Background(), "/tidemark/brokers/ids/01",
		`{"id":1,"address":"127.0.0.1:1"}`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if s := c.state("t", 0); s.Leader != 1 || len(s.ISR) != 2 {
		t.Fatalf("t-0 = %+v after a stray key brokers/ids/01 appeared; live broker 1 must keep its leadership", s)
	}
	if n := c.logs.count("Broker failure", "broker_id=1"); n > 0 {
		t.Fatalf("the controller declared the live broker 1 failed (%d log lines)", n)
	}
}

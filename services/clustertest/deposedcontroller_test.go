package clustertest

import (
	"context"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// A broker that starts again learns the newest controller epoch from etcd
// when it registers, so a deposed controller (a frozen process that
// resumed) cannot tell it roles before the active controller's first push
// reaches it; a new process would otherwise start at controller epoch 0 and
// take them. Here no controller is active at all while it restarts.
func TestARestartedBrokerRefusesADeposedController(t *testing.T) {
	c := Start(t, Options{Brokers: 2, Controllers: 2})
	CreateAssigned(t, c, "deposed", [][]int32{{1, 2}}, nil)
	first, firstEpoch := c.ActiveController()
	c.StopController(first)
	c.WaitFor(20*time.Second, "the standby in office", func() bool { id, e := c.ActiveController(); return id > 0 && id != first && e > firstEpoch })
	second, _ := c.ActiveController()
	c.StopController(second)

	c.CrashBroker(2)
	c.StartBroker(2)
	bc := controlv1.NewBrokerControlServiceClient(c.Conn(c.BrokerConfig(2).Listen))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := bc.LeaderAndIsr(ctx, &controlv1.LeaderAndIsrRequest{ControllerId: first, ControllerEpoch: firstEpoch,
		Partitions: []*commonv1.PartitionState{{Topic: "deposed", Partition: 0, Leader: 2, LeaderEpoch: 99, Isr: []int32{2}, Replicas: []int32{1, 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	if code := kerr.Code(resp.GetErrorCode()); code != kerr.StaleControllerEpoch {
		t.Fatalf("the deposed controller (epoch %d) was answered %v, want STALE_CONTROLLER_EPOCH", firstEpoch, code)
	}
	if c.Leads(2, "deposed", 0) {
		t.Fatal("the deposed controller made broker 2 a leader")
	}
}

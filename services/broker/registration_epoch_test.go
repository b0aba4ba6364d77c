package broker

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/tlsconf"
)

// A deposed controller that resumed learns a starting broker's new epoch
// from etcd. Its LeaderAndIsr for that epoch, arriving the moment the epoch
// is known to the broker's checks, is refused: the broker takes the
// controller epoch etcd held at its registration before it stores the
// broker epoch. It used to learn it only after, and a new process, at
// controller epoch 0, let the deposed controller make it leader.
func TestADeposedControllerIsRefusedOnceTheBrokerEpochIsKnown(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const newest = 7
	if _, err := srv.Client(t).Put(ctx, "/tidemark/controller_epoch", "7"); err != nil {
		t.Fatal(err)
	}

	var once sync.Once
	var answer error
	afterRegisterHook = func(b *Broker, brokerEpoch int64) {
		once.Do(func() {
			_, answer = b.rm.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 1, ControllerEpoch: newest - 1,
				BrokerEpoch: brokerEpoch, Partitions: []*commonv1.PartitionState{{Topic: "deposed", Partition: 0,
					Leader: 1, LeaderEpoch: 1, Isr: []int32{1}, Replicas: []int32{1}}}})
		})
	}
	t.Cleanup(func() { afterRegisterHook = nil })

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.TLS = tlsconf.Plain()
	cfg.Listener, cfg.Listen = lis, lis.Addr().String()
	cfg.DataDir = t.TempDir()
	cfg.Etcd.Endpoints = config.StringList{srv.Endpoint()}
	cfg.SessionTimeout = 2 * time.Second
	b, err := Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop(ctx)

	if code := kerr.CodeOf(answer); code != kerr.StaleControllerEpoch {
		t.Fatalf("LeaderAndIsr of deposed controller epoch %d for the new broker epoch: %v, want STALE_CONTROLLER_EPOCH", newest-1, answer)
	}
	if _, ok := b.rm.Replica(replica.TP{Topic: "deposed", Partition: 0}); ok {
		t.Fatal("the deposed controller's LeaderAndIsr created a replica")
	}
}

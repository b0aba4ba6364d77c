package metastore

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestLoadClusterThenWatchStaysInStep loads a snapshot, applies the watch
// from the next revision while the cluster changes, and checks the result
// equals a fresh load.
func TestLoadClusterThenWatchStaysInStep(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	reg, err := newStore(t, srv.Client(t)).RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "b1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	if _, err := sess.CreateTopic(ctx, simpleTopic("before", 2)); err != nil {
		t.Fatal(err)
	}

	cl, err := s.LoadCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Controller == nil || cl.Controller.Epoch != 1 || cl.ControllerEpochRevision != sess.EpochRevision() ||
		len(cl.Brokers) != 1 || cl.Brokers[1].Epoch != reg.Epoch() || len(cl.Topics["before"].Partitions) != 2 {
		t.Fatalf("loaded %+v", cl)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := s.Watch(wctx, cl.Revision+1)

	if _, err := sess.CreateTopic(ctx, simpleTopic("after", 3)); err != nil {
		t.Fatal(err)
	}
	rec := cl.Topics["before"].Partitions[0]
	if _, err := sess.UpdatePartitionState(ctx, PartitionUpdate{Current: rec, Next: PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutBrokerConfig(ctx, DefaultBrokerEntity, map[string]string{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AllocateProducerIDBlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.DeleteTopic(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}

	fresh, err := s.LoadCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(3 * time.Second)
	for cl.Revision < fresh.Revision {
		select {
		case wr := <-watch:
			if wr.Err != nil {
				t.Fatal(wr.Err)
			}
			for _, ev := range wr.Events {
				if ev.Err != nil {
					t.Fatal(ev.Err)
				}
				cl.Apply(ev)
			}
		case <-deadline:
			t.Fatalf("watch stuck at revision %d, want %d", cl.Revision, fresh.Revision)
		}
	}
	if !reflect.DeepEqual(cl, fresh) {
		a, _ := json.MarshalIndent(cl, "", " ")
		b, _ := json.MarshalIndent(fresh, "", " ")
		t.Fatalf("watched cluster differs from a fresh load:\n%s\nvs\n%s", a, b)
	}
	if fresh.NextProducerID != ProducerIDBlockSize || fresh.Topics["before"] != nil || len(fresh.Brokers) != 0 {
		t.Fatalf("fresh load = %+v", fresh)
	}
}

func TestDumpIsReadableJSON(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 4, longTTL)
	reg, err := newStore(t, srv.Client(t)).RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "b1", Rack: "r1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	if _, err := sess.CreateTopic(ctx, simpleTopic("t", 1)); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]Entry{}
	for _, e := range snap.Entries {
		byKey[e.Key] = e
	}
	want := map[string]Kind{
		"/tidemark/controller":                          KindController,
		"/tidemark/controller_epoch":                    KindControllerEpoch,
		"/tidemark/brokers/ids/1":                       KindBroker,
		"/tidemark/brokers/topics/t":                    KindTopic,
		"/tidemark/brokers/topics/t/partitions/0/state": KindPartitionState,
	}
	for key, kind := range want {
		if e, ok := byKey[key]; !ok || e.Kind != kind {
			t.Errorf("%s: entry %+v", key, e)
		}
	}
	if len(snap.Entries) != len(want) {
		t.Errorf("dump has %d entries, want %d", len(snap.Entries), len(want))
	}
	if e := byKey["/tidemark/brokers/ids/1"]; e.CreateRevision != reg.Epoch() || e.Lease == 0 {
		t.Errorf("broker entry %+v", e)
	}
	out, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`"kind":"partition_state"`, `"isr":[1,2,3]`, `"controller_id":4`, `"rack":"r1"`, `"partitions":{"0":[1,2,3]}`} {
		if !strings.Contains(string(out), frag) {
			t.Errorf("dump JSON lacks %s:\n%s", frag, out)
		}
	}
}

// A config put into etcd by hand that is not a JSON map of strings (a
// number as a value) is ignored by the load, with the other configs and
// the rest of the cluster kept: it failed the load, which ended every
// controller term as it began.
func TestLoadClusterIgnoresAConfigThatDoesNotDecode(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	if _, err := sess.CreateTopic(ctx, simpleTopic("kept", 1)); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutTopicConfig(ctx, "kept", map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client(t).Put(ctx, s.k.brokerConfig(DefaultBrokerEntity), `{"retention.ms":60000}`); err != nil {
		t.Fatal(err)
	}
	cl, err := s.LoadCluster(ctx)
	if err != nil {
		t.Fatalf("LoadCluster with an undecodable config: %v", err)
	}
	if kept := cl.Topics["kept"]; kept == nil || kept.Config["cleanup.policy"] != "compact" || len(kept.Partitions) != 1 {
		t.Fatalf("loaded topic %+v", kept)
	}
	if _, ok := cl.BrokerConfigs[DefaultBrokerEntity]; ok {
		t.Fatalf("the undecodable config was loaded: %v", cl.BrokerConfigs)
	}
}

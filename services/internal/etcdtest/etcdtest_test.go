package etcdtest

import (
	"context"
	"testing"
	"time"
)

func TestServerAndBridge(t *testing.T) {
	start := time.Now()
	srv := Start(t)
	if d := time.Since(start); d > time.Second {
		t.Errorf("server took %s to be ready, want < 1s", d)
	}
	direct := srv.Client(t)
	b := srv.NewBridge(t)
	via := b.Client(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := via.Put(ctx, "k", "1"); err != nil {
		t.Fatalf("put through bridge: %v", err)
	}

	// Paused: requests through the bridge hang, direct ones still work.
	b.Pause()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := via.Get(short, "k")
	cancelShort()
	if err == nil {
		t.Fatal("get through a paused bridge succeeded")
	}
	if _, err := direct.Put(ctx, "k", "2"); err != nil {
		t.Fatalf("direct put while bridge paused: %v", err)
	}
	b.Resume()
	resp, err := via.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Fatalf("get after resume = %v, %v", resp, err)
	}

	// Dropped: the request in flight may fail, then the client redials.
	b.DropConnections()
	var putErr error
	for range 50 {
		if _, putErr = via.Put(ctx, "k", "3"); putErr == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if putErr != nil {
		t.Fatalf("put after drop: %v", putErr)
	}

	// Blackholed: the connection open now hangs for good; a new one flows.
	b.Blackhole()
	short, cancelShort = context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = via.Get(short, "k")
	cancelShort()
	if err == nil {
		t.Fatal("get over a blackholed connection succeeded")
	}
	if _, err := b.Client(t).Get(ctx, "k"); err != nil {
		t.Fatalf("get over a new connection after the blackhole: %v", err)
	}
}

func TestMinimumLeaseTTLIsOneSecond(t *testing.T) {
	cli := Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := cli.TimeToLive(ctx, lease.ID)
	if err != nil || ttl.GrantedTTL != 1 {
		t.Fatalf("granted TTL = %+v, %v; want 1", ttl, err)
	}
}

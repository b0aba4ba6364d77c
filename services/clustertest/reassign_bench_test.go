package clustertest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"tidemark.io/services/client"
)

// BenchmarkReplicationThrottle moves a replica of a 4 MB partition to a new
// broker under follower.replication.throttled.rate (then, apart, under the
// leader's leader.replication.throttled.rate) and prints the rate the
// new replica's log grew at, measured over 10 s after a 3 s start, against
// the setting. The throttle's samples are 1 s, 3 of them, so the measure
// settles within the first seconds (Kafka's default is 11 samples of 1 s).
func BenchmarkReplicationThrottle(b *testing.B) {
	const limit = 256 << 10 // bytes/s
	for _, side := range []struct{ name, broker, rate, list, replicas string }{
		{"follower", "3", "follower.replication.throttled.rate", "follower.replication.throttled.replicas", "0:3"},
		{"leader", "1", "leader.replication.throttled.rate", "leader.replication.throttled.replicas", "0:1"},
	} {
		b.Run(side.name, func(b *testing.B) { benchThrottle(b, limit, side.broker, side.rate, side.list, side.replicas) })
	}
}

func benchThrottle(b *testing.B, limit int, brokerID, rateKey, listKey, list string) {
	for i := 0; i < b.N; i++ {
		c := Start(b, Options{Brokers: 3, BrokerSettings: map[string]string{
			"replica.fetch.max.bytes": "16384", "replication.quota.window.num": "3", "replication.quota.window.size.seconds": "1"}})
		CreateAssigned(b, c, "thr", [][]int32{{1, 2}}, nil)
		p, err := client.NewProducer(c.Client(), client.ProducerOptions{BatchSize: 64 << 10, Acks: client.AcksAll})
		if err != nil {
			b.Fatal(err)
		}
		value := make([]byte, 1000)
		for range 4000 {
			p.ProduceAsync(client.Record{Topic: "thr", Partition: 0, ManualPartition: true, Value: value}, func(client.Result, error) {})
		}
		if err := p.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		Throttle(b, c, "thr", brokerID, rateKey, strconv.Itoa(limit), listKey, list)
		Reassign(b, c, "thr", map[int32][]int32{0: {1, 2, 3}})
		size := func() int64 {
			n, _ := c.Broker(3).ReplicaSizeBytes("thr", 0)
			return n
		}
		time.Sleep(3 * time.Second)
		s0, t0 := size(), time.Now()
		time.Sleep(10 * time.Second)
		s1, t1 := size(), time.Now()
		got := float64(s1-s0) / t1.Sub(t0).Seconds()
		b.ReportMetric(got, "B/s")
		b.Logf("%s %d B/s: the new replica grew at %.0f B/s (%.1f%% of the setting)", rateKey, limit, got, 100*got/float64(limit))
	}
}

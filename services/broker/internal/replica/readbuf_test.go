package replica

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// A follower fetch reads into a pooled buffer that comes back once the
// answer is sent (RecycleFetch): reading the same 16 KiB again and again
// allocates a fraction of it per fetch (a few hundred bytes; under the race
// detector, which drops a quarter of what is put into a sync.Pool, about
// half of it), and a reused buffer holds exactly the log's bytes.
func TestFollowerFetchReusesRecycledReadBuffers(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	value := strings.Repeat("v", 16<<10)
	if _, err := e.m.Produce(context.Background(), tp0, 1, batch(value), produceTimeout); err != nil {
		t.Fatal(err)
	}
	fetch := func() []FollowerFetchAnswer {
		answers := e.m.ReplicaFetch(context.Background(), FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2],
			Partitions: []FollowerFetchPartition{{TP: tp0, FetchOffset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}})
		if answers[0].Err != nil {
			t.Fatal(answers[0].Err)
		}
		return answers
	}
	first := fetch()
	want := bytes.Clone(first[0].Records)
	if len(want) < len(value) {
		t.Fatalf("read %d bytes, want the whole batch", len(want))
	}
	e.m.RecycleFetch(first)
	if first[0].Records != nil {
		t.Fatal("a recycled answer still holds its records")
	}

	const rounds = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		answers := fetch()
		if !bytes.Equal(answers[0].Records, want) {
			t.Fatal("a fetch into a reused buffer read different bytes")
		}
		e.m.RecycleFetch(answers)
	}
	runtime.ReadMemStats(&after)
	perFetch := (after.TotalAlloc - before.TotalAlloc) / rounds
	if perFetch > uint64(len(want))*3/4 {
		t.Fatalf("%d bytes allocated per fetch of a %d-byte batch: the read buffers are not reused", perFetch, len(want))
	}
	t.Logf("%d bytes allocated per fetch of a %d-byte batch", perFetch, len(want))
}

// A consumer fetch reads into the same pool: its result's Release gives the
// buffer back, so repeated fetches of a committed batch allocate a fraction
// of it, and a reused buffer holds exactly the log's bytes.
func TestConsumerFetchReusesReleasedReadBuffers(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1}, nil) // the only in-sync replica: acks=1 commits at once
	value := strings.Repeat("c", 16<<10)
	if _, err := e.m.Produce(context.Background(), tp0, 1, batch(value), produceTimeout); err != nil {
		t.Fatal(err)
	}
	fetch := func() ConsumerFetchResult {
		res, err := e.m.Fetch(context.Background(), ConsumerFetch{TP: tp0, Offset: 0, MaxBytes: 1 << 20, CurrentLeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := fetch()
	want := bytes.Clone(first.Records)
	if len(want) < len(value) {
		t.Fatalf("read %d bytes, want the whole batch (HW %d)", len(want), e.hw())
	}
	first.Release()
	if first.Records != nil {
		t.Fatal("a released result still holds its records")
	}
	const rounds = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		res := fetch()
		if !bytes.Equal(res.Records, want) {
			t.Fatal("a fetch into a reused buffer read different bytes")
		}
		res.Release()
	}
	runtime.ReadMemStats(&after)
	if perFetch := (after.TotalAlloc - before.TotalAlloc) / rounds; perFetch > uint64(len(want))*3/4 {
		t.Fatalf("%d bytes allocated per consumer fetch of a %d-byte batch: the read buffers are not reused", perFetch, len(want))
	}
}

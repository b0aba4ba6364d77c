package grpcapi

import (
	"context"
	"time"

	"tidemark.io/services/broker/internal/quota"
	"tidemark.io/services/platform/identity"
)

// throttle records n bytes of kind (a produce) against the caller and, when
// that puts it over its byte-rate quota, holds the answer back for the
// throttle time (as Kafka delays a throttled client's response) unless the
// client waits it out itself (ClientThrottles), and returns it in ms for
// the answer's throttle_time_ms. The request itself has been served: being
// over quota delays, it never fails.
func (b *Broker) throttle(ctx context.Context, kind quota.Kind, n int) int32 {
	if b.Quotas == nil || n == 0 {
		return 0
	}
	c := quota.FromBroker(kind, b.RM.BrokerConfig())
	d := b.Quotas.Record(kind, c, b.quotaClient(ctx), n)
	if d <= 0 {
		return 0
	}
	if ctx.Value(clientThrottlesKey{}) == nil {
		wait(ctx, d)
	}
	return quota.Millis(d)
}

type clientThrottlesKey struct{}

// ClientThrottles marks a request whose client waits out its answer's
// throttle_time_ms itself before its next request (Kafka's KIP-219, a
// Produce from v6 on): its answer goes at once, as Kafka's does, and what
// it owes holds the connection's next produce (WaitProduceThrottle), as
// Kafka mutes the connection. Held back too, the answer cost such a client
// each throttle twice.
func ClientThrottles(ctx context.Context) context.Context {
	return context.WithValue(ctx, clientThrottlesKey{}, true)
}

// fetchThrottle waits out what the caller owes for earlier fetches over its
// consumer quota, before this one reads anything (Kafka answers a throttled
// fetch without records and mutes the connection for as long: either way
// nothing is held in memory while the client is slowed down). It returns
// the wait in ms.
func (b *Broker) fetchThrottle(ctx context.Context) int32 {
	if b.Quotas == nil || ctx.Value(fetchWaitedKey{}) != nil {
		return 0
	}
	d := b.Quotas.Owed(quota.Fetch, quota.FromBroker(quota.Fetch, b.RM.BrokerConfig()), b.quotaClient(ctx))
	if d <= 0 {
		return 0
	}
	wait(ctx, d)
	return quota.Millis(d)
}

// fetchRecorded counts a fetch's bytes against the caller's consumer quota
// and returns, in ms, how long the caller is now over it (for the answer's
// throttle_time_ms; the next fetch waits it out, this answer does not).
func (b *Broker) fetchRecorded(ctx context.Context, n int) int32 {
	if b.Quotas == nil || n == 0 {
		return 0
	}
	d := b.Quotas.Record(quota.Fetch, quota.FromBroker(quota.Fetch, b.RM.BrokerConfig()), b.quotaClient(ctx), n)
	if d <= 0 {
		return 0
	}
	return quota.Millis(d)
}

// quotaClient is who the request's bytes count against: its principal
// and, for a Kafka request, the client id of its header.
func (b *Broker) quotaClient(ctx context.Context) quota.Client {
	who := quota.Client{Principal: identity.FromContext(ctx).Name}
	if b.ClientID != nil {
		who.ClientID = b.ClientID(ctx)
	}
	return who
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

type fetchWaitedKey struct{}

// WaitFetchThrottle waits out, once, what the caller owes for earlier
// fetches, and returns a context under which FetchAtEpoch does not wait
// again: a Kafka Fetch of many partitions is one request, held back once
// (Kafka computes one throttle per request), not once per partition.
func (b *Broker) WaitFetchThrottle(ctx context.Context) (context.Context, int32) {
	ms := b.fetchThrottle(ctx)
	return context.WithValue(ctx, fetchWaitedKey{}, true), ms
}

// WaitProduceThrottle waits out what the caller owes for earlier produces
// over its producer quota, before a Kafka Produce appends anything: the
// connection's next request starts only once this one has appended, so
// the wait holds the connection as Kafka's mute does, and a pipelining
// (or acks=0) producer cannot append past its quota while earlier answers
// are held back.
func (b *Broker) WaitProduceThrottle(ctx context.Context) {
	if b.Quotas == nil {
		return
	}
	if d := b.Quotas.Owed(quota.Produce, quota.FromBroker(quota.Produce, b.RM.BrokerConfig()), b.quotaClient(ctx)); d > 0 {
		wait(ctx, d)
	}
}

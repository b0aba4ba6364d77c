package client

import (
	"context"
	"slices"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
)

// The calls below are for programs that pass requests through to the
// brokers as they are (the REST gateway): they route with the client's
// metadata cache and connections, and make their own calls, timeouts and
// retry decisions.

// Leader returns a BrokerService client on the leader of topic-partition as
// the metadata cache names it, refreshing the cache when it does not know
// or no longer trusts it. An UNKNOWN_TOPIC_OR_PARTITION here comes from the
// cluster's metadata, so the topic or partition does not exist. Report a
// failed answer of a call made with it through NoteError.
func (c *Client) Leader(ctx context.Context, topic string, partition int32) (brokerv1.BrokerServiceClient, error) {
	r, err := c.meta.leader(ctx, topic, partition)
	if err != nil {
		return nil, err
	}
	return c.Broker(r.addr)
}

// NoteError updates the metadata cache after a call to a partition's
// leader failed: a leader hint in the answer is taken at once; an answer
// meaning the leader moved or is not known yet marks the partition to be
// looked up again on its next call.
func (c *Client) NoteError(topic string, partition int32, err error) {
	if err != nil {
		c.meta.noteError(topic, partition, toKerr(err))
	}
}

// NoteTimeout marks topic-partition to be looked up again after a call to
// its leader got no answer within its own timeout: a leader that stopped
// answering may have been replaced, and no answer will say so.
func (c *Client) NoteTimeout(topic string, partition int32) {
	c.meta.noteTimeout(topic, partition)
}

// Broker returns a BrokerService client on the broker at addr, over the
// client's pooled connection (made on first use, dialled lazily).
func (c *Client) Broker(addr string) (brokerv1.BrokerServiceClient, error) {
	cc, err := c.pool.get(addr)
	if err != nil {
		return nil, toKerr(err)
	}
	return brokerv1.NewBrokerServiceClient(cc), nil
}

// AnyBrokerAddrs returns the addresses to try, in order, for a call any broker
// may answer: the brokers the metadata knows (in random order, to spread
// the load), then the bootstrap list, those whose last call went unanswered
// last. A broker restarted on another port is reached at its new address
// once the metadata knows it, even when every address the client was
// given is gone.
func (c *Client) AnyBrokerAddrs() []string {
	c.meta.mu.Lock()
	defer c.meta.mu.Unlock()
	return c.meta.candidatesLocked()
}

// NoteAnswered records whether the broker at addr answered a call made
// over Broker or GroupCoordinator: err is the call's outcome as it came
// back (not yet mapped to a *kerr.Error), attempt the call's own context
// and ctx the caller's. A broker whose call went unanswered (its own
// timeout ran out, or no connection) is put last in AnyBrokerAddrs until a
// call to it is answered, as the client's own any-broker calls do.
func (c *Client) NoteAnswered(ctx, attempt context.Context, addr string, err error) {
	c.meta.noteAnswered(addr, ctx, attempt, err)
}

// RefreshBrokers looks the brokers up again (Options.DiscoverBrokers
// included), for a caller that found none of AnyBrokerAddrs answering.
func (c *Client) RefreshBrokers(ctx context.Context) error { return c.meta.refresh(ctx) }

// Bootstrap returns the broker addresses the client was given.
func (c *Client) Bootstrap() []string { return slices.Clone(c.bootstrap) }

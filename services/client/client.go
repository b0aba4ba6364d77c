package client

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
)

// Client talks to tidemark brokers: it keeps one connection per broker and a
// metadata cache of partition leaders. Producers and Consumers are built on
// a Client and share its connections; it is safe for concurrent use.
type Client struct {
	opts      Options
	bootstrap []string
	pool      connPool
	meta      *metadata
	produce   *produceLinks
	log       *slog.Logger
}

// New returns a client that bootstraps from any of the broker addresses
// (host:port). It dials nothing until the first call; use Metadata to check
// that the cluster answers.
func New(bootstrap []string, opts Options) (*Client, error) {
	bootstrap = slices.DeleteFunc(slices.Clone(bootstrap), func(a string) bool { return a == "" })
	if len(bootstrap) == 0 {
		return nil, kerr.BadField(kerr.InvalidConfig, "bootstrap.servers", "no broker address given")
	}
	opts = opts.withDefaults()
	c := &Client{opts: opts, bootstrap: bootstrap, pool: newConnPool(opts), log: opts.Logger}
	c.meta = newMetadata(c)
	c.produce = newProduceLinks(c)
	return c, nil
}

// Close closes every connection, and returns once the goroutines the
// client runs for them (each produce stream's receiver) have ended.
// Producers and Consumers built on the client must be closed first.
func (c *Client) Close() error {
	c.produce.close()
	return c.pool.close()
}

// Metadata asks a broker for the metadata of topics (all topics when none
// are given), refreshing the cache with the answer.
func (c *Client) Metadata(ctx context.Context, topics ...string) (*brokerv1.MetadataResponse, error) {
	ctx, cancel := c.opts.withAPITimeout(ctx)
	defer cancel()
	c.meta.mu.Lock()
	addrs := c.meta.candidatesLocked()
	c.meta.mu.Unlock()
	var want []string
	if len(topics) > 0 {
		want = topics
	}
	resp, from, err := c.meta.fetchOrDiscover(ctx, addrs, &brokerv1.MetadataRequest{Topics: want})
	if err != nil {
		return nil, err
	}
	c.meta.mu.Lock()
	c.meta.applyLocked(resp, want, c.meta.answererLocked(resp, from))
	c.meta.mu.Unlock()
	return resp, nil
}

// MetadataPage asks a broker for one page of the metadata of all topics
// (pageSize topics at most, in name order, after pageToken: a
// next_page_token of an earlier page), for callers that relay a list in
// pages (the REST gateway). The cache takes the page's topics and brokers;
// a topic it holds that is missing from the page is not taken as deleted,
// since the page is not the whole list.
func (c *Client) MetadataPage(ctx context.Context, pageSize int32, pageToken string) (*brokerv1.MetadataResponse, error) {
	// Every broker refuses a bad page, and a refusal sends the request on
	// to the next broker, then to those the controller names: refused here.
	if _, err := paging.Parse(pageSize, pageToken); err != nil {
		return nil, err
	}
	ctx, cancel := c.opts.withAPITimeout(ctx)
	defer cancel()
	c.meta.mu.Lock()
	addrs := c.meta.candidatesLocked()
	c.meta.mu.Unlock()
	resp, from, err := c.meta.fetchOrDiscover(ctx, addrs, &brokerv1.MetadataRequest{PageSize: pageSize, PageToken: pageToken})
	if err != nil {
		return nil, err
	}
	served := make([]string, 0, len(resp.GetTopics()))
	for _, t := range resp.GetTopics() {
		served = append(served, t.GetName())
	}
	c.meta.mu.Lock()
	c.meta.applyLocked(resp, served, c.meta.answererLocked(resp, from))
	c.meta.mu.Unlock()
	return resp, nil
}

// brokerCall runs one attempt of fn against the broker at addr, bounded by
// the request timeout.
func (c *Client) brokerCall(ctx context.Context, addr string, fn func(context.Context, brokerv1.BrokerServiceClient) error) error {
	return c.brokerCallTimeout(ctx, addr, c.opts.RequestTimeout, fn)
}

func (c *Client) brokerCallTimeout(ctx context.Context, addr string, timeout time.Duration, fn func(context.Context, brokerv1.BrokerServiceClient) error) error {
	cc, err := c.pool.get(addr)
	if err != nil {
		return toKerr(err)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = fn(actx, brokerv1.NewBrokerServiceClient(cc))
	c.meta.noteAnswered(addr, ctx, actx, err)
	if err != nil {
		return toKerr(err)
	}
	return nil
}

// partitionCall runs fn against the leader of topic-partition, retrying
// retriable answers with backoff (after updating the leader from hints or a
// metadata refresh) until ctx ends. what names the call in errors.
func (c *Client) partitionCall(ctx context.Context, what, topic string, partition int32,
	fn func(ctx context.Context, r route, bc brokerv1.BrokerServiceClient) error) error {
	ctx, cancel := c.opts.withAPITimeout(ctx)
	defer cancel()
	var last error
	for attempt := 1; ; attempt++ {
		err := c.partitionAttempt(ctx, topic, partition, fn)
		if err == nil {
			return nil
		}
		ke := toKerr(err)
		if ctx.Err() != nil {
			return ctxError(ctx, lastOr(last, ke), "%s %s-%d", what, topic, partition)
		}
		var missing *noSuchPartition
		if !ke.Code.Retriable() || errors.As(err, &missing) {
			return wrap(ke, "%s %s-%d", what, topic, partition)
		}
		last = lastOr(last, ke)
		c.log.Debug("retrying", "call", what, "topic", topic, "partition", partition, "attempt", attempt, "err", ke)
		if !sleep(ctx, backoff(c.opts.RetryBackoff, c.opts.RetryBackoffMax, attempt)) {
			return ctxError(ctx, last, "%s %s-%d", what, topic, partition)
		}
	}
}

func (c *Client) partitionAttempt(ctx context.Context, topic string, partition int32,
	fn func(ctx context.Context, r route, bc brokerv1.BrokerServiceClient) error) error {
	r, err := c.meta.leader(ctx, topic, partition)
	if err != nil {
		return err
	}
	err = c.brokerCall(ctx, r.addr, func(ctx context.Context, bc brokerv1.BrokerServiceClient) error {
		return fn(ctx, r, bc)
	})
	ke := toKerr(err)
	c.meta.noteError(topic, partition, ke)
	if ke != nil && ke.Code == kerr.RequestTimedOut {
		c.meta.noteTimeout(topic, partition)
	}
	return err
}

// lastOr picks the error to report after a failed attempt: e, unless it
// is only a timeout and an earlier, more telling error is known.
func lastOr(last error, e *kerr.Error) error {
	if e == nil || (last != nil && e.Code == kerr.RequestTimedOut) {
		return last
	}
	return e
}

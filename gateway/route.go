package gateway

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/status"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// router finds where a BrokerService call belongs: a partition's calls go
// to its leader as the client's metadata cache names it (corrected by the
// answers, see client.Client.NoteError); other calls go to any broker. The
// gateway passes each request through as it came and makes its own retry
// decisions (see reroutable).
type router struct {
	cl     *client.Client
	budget time.Duration
	// requestTimeout bounds one attempt beyond the time the broker may
	// hold it on purpose (acks=all, a fetch's max wait).
	requestTimeout time.Duration
	// stopping ends when the gateway stops; streams end with it.
	stopping context.Context
}

// onLeader runs call against the leader of topic-partition, looking the
// leader up again (or following the leader the answer named) and retrying
// while the answer is one a new route may fix, within the retry budget.
func (r *router) onLeader(ctx context.Context, topic string, partition int32, call func(brokerv1.BrokerServiceClient) error) error {
	if err := checkPartitionName(topic, partition); err != nil {
		return err
	}
	p := newPacer(r.budget)
	settled := time.Now().Add(topicSettle)
	for {
		retry, err := r.leaderAttempt(ctx, topic, partition, call)
		if err == nil {
			return nil
		}
		if !retry && asKerr(err).Code == kerr.UnknownTopicOrPartition && time.Now().Before(settled) {
			// A topic created a moment ago reaches each broker with the
			// controller's next UpdateMetadata: ask again for a while.
			retry = true
		}
		if !retry || ctx.Err() != nil || !p.wait(ctx) {
			return err
		}
	}
}

// checkPartitionName refuses, before any broker is asked, a topic name
// Kafka's rule forbids and a negative partition: neither can ever exist,
// and both used to be asked about for the whole of topicSettle before
// failing UNKNOWN_TOPIC_OR_PARTITION.
func checkPartitionName(topic string, partition int32) error {
	return checkPartitionNameAt("", topic, partition)
}

// checkPartitionNameAt is checkPartitionName for a partition named inside
// a request's body: the fields named start with at ("partitions[2].").
func checkPartitionNameAt(at, topic string, partition int32) error {
	if err := topicconfig.ValidateTopicName(topic); err != nil {
		return kerr.BadField(kerr.InvalidTopicException, at+"topic", "%s", kerr.As(err).Message)
	}
	if partition < 0 {
		return kerr.BadField(kerr.InvalidPartitions, at+"partition", "must be >= 0, got %d", partition)
	}
	return nil
}

// topicSettle is how long a partition's call is retried while the
// metadata answers that its topic does not exist: the broker asked may not
// have had the UpdateMetadata of a topic just created (the answer of the
// CreateTopics call does not wait for every broker's). A topic that does
// not exist still fails within it.
const topicSettle = 2 * time.Second

// leaderAttempt makes one attempt and says whether another may succeed.
func (r *router) leaderAttempt(ctx context.Context, topic string, partition int32,
	call func(brokerv1.BrokerServiceClient) error) (bool, error) {
	bc, err := r.leader(ctx, topic, partition)
	if err != nil {
		// The metadata's own UNKNOWN_TOPIC_OR_PARTITION is final (the
		// topic or partition does not exist) once topicSettle has passed.
		ke := asKerr(err)
		return reroutable(ke.Code), ke
	}
	ke := asKerr(call(bc))
	if ke == nil {
		return false, nil
	}
	if ke.Code == kerr.RequestTimedOut && ctx.Err() == nil {
		// The attempt's own timeout ran out: the leader may be frozen
		// and replaced, which no answer will tell. Without this, calls
		// went to it until the metadata aged out (metadata.max.age).
		r.cl.NoteTimeout(topic, partition)
	}
	return r.noteError(topic, partition, ke), ke
}

// noteError lets the client's metadata follow the answer and says whether
// a new route may fix it. Besides the table's Reroute codes, one more: a
// leader the metadata named that does not know the partition has not
// caught up with the controller yet (UNKNOWN_TOPIC_OR_PARTITION is not
// rerouted in general because the metadata's own answer is final).
func (r *router) noteError(topic string, partition int32, ke *kerr.Error) bool {
	r.cl.NoteError(topic, partition, ke)
	return reroutable(ke.Code) || ke.Code == kerr.UnknownTopicOrPartition
}

// leader returns a client on the leader of topic-partition.
func (r *router) leader(ctx context.Context, topic string, partition int32) (brokerv1.BrokerServiceClient, error) {
	bc, err := r.cl.Leader(ctx, topic, partition)
	if errors.Is(err, client.ErrClosed) {
		return nil, errStopped
	}
	return bc, err
}

// onAny runs call against a broker, moving on to the next address while
// brokers cannot be reached or leave an attempt unanswered, within the
// retry budget. call gets the attempt's context, bounded by the request
// timeout.
func (r *router) onAny(ctx context.Context, call func(context.Context, brokerv1.BrokerServiceClient) error) error {
	return r.onAnyAddress(ctx, func(actx context.Context, addr string) error {
		bc, err := r.cl.Broker(addr)
		if err != nil {
			return err
		}
		return call(actx, bc)
	})
}

// onAnyAddress is onAny for any service: call gets a broker's address, the
// brokers the metadata knows first, then the bootstrap list, those whose
// last call went unanswered last (see client.Client.AnyBrokerAddrs). The
// bootstrap list alone held a broker that came back on another port at its
// old address for as long as the gateway ran. Each attempt's outcome is
// reported to the client (NoteAnswered): a frozen broker the metadata still
// lists was asked as often as any other, and each such REST call waited a
// whole request timeout and answered 504; it is now asked last until it
// answers, and a call it left unanswered moves on to the next address (the
// calls made here, FindCoordinator and InitProducerId, may be asked again).
func (r *router) onAnyAddress(ctx context.Context, call func(ctx context.Context, addr string) error) error {
	p := newPacer(r.budget)
	for {
		var last *kerr.Error
		for _, addr := range r.cl.AnyBrokerAddrs() {
			unanswered, err := r.anyAttempt(ctx, addr, call)
			if errors.Is(err, client.ErrClosed) {
				return errStopped
			}
			ke := asKerr(err)
			if ke == nil {
				return nil
			}
			if ctx.Err() != nil || !(ke.Code == kerr.NetworkException || unanswered) {
				return ke
			}
			last = ke
		}
		if last == nil {
			return kerr.New(kerr.NetworkException, "no broker address to try")
		}
		// Pause only after every address has been tried, then look for
		// brokers elsewhere: every one may have moved.
		if !p.wait(ctx) {
			return last
		}
		r.refreshBrokers(ctx)
	}
}

// anyAttempt is one call to the broker at addr, bounded by the request
// timeout, its outcome noted in the client's metadata; unanswered says the
// attempt's own timeout ran out while the caller still waits.
func (r *router) anyAttempt(ctx context.Context, addr string, call func(context.Context, string) error) (unanswered bool, err error) {
	actx, cancel := context.WithTimeout(ctx, r.requestTimeout)
	defer cancel()
	err = call(actx, addr)
	if _, rpc := status.FromError(err); rpc {
		// Only what the call itself met says anything of the broker (not
		// a refusal before it was sent: the client closed, say).
		r.cl.NoteAnswered(ctx, actx, addr, err)
	}
	return err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded), err
}

// refreshBrokers asks where the brokers are now, within one request
// timeout; what it learns goes into the client's metadata.
func (r *router) refreshBrokers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.requestTimeout)
	defer cancel()
	_ = r.cl.RefreshBrokers(ctx)
}

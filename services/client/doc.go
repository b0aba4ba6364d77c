// Package client is the Go client of tidemark: a Producer and a Consumer
// over the brokers' BrokerService, and an Admin over the controllers'
// AdminService. The CLI, the gateway, the tests and the benchmarks all use
// it.
//
// # Connections and metadata
//
// A Client bootstraps from any of a list of broker addresses and keeps one
// *grpc.ClientConn per address (insecure, with the otelgrpc client stats
// handler so that traces propagate; Options.Dialer routes connections
// through a network simulator in tests). It caches BrokerService.Metadata:
// brokers, topics, partition leaders and leader epochs. An answer of
// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH that
// names the leader updates the cache in place; those codes without a hint,
// and UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE and
// NETWORK_EXCEPTION, mark the partition so that its next request looks the
// leader up again, and so does a request the leader did not answer in time.
// A topic's entry older than metadata.max.age (5 minutes) is looked up
// again before use; each answer replaces the list of brokers, so one that
// left the cluster is no longer asked (the bootstrap addresses always
// are). Concurrent lookups share one Metadata request.
//
// # Retries
//
// Only codes that kerr marks retriable are retried, after an exponential
// backoff with ±20% jitter (retry.backoff.ms 100 to retry.backoff.max.ms
// 1000). Each attempt is bounded by the request timeout (request.timeout.ms
// 30000). A produced record is bounded by delivery.timeout.ms (120000);
// other calls by their context, or Options.APITimeout (60000, Kafka's
// default.api.timeout.ms) when the context has no deadline.
//
// # Errors
//
// Errors are *kerr.Error values wrapped with what was being done: use
// kerr.CodeOf(err) or errors.As to switch on the code. A call abandoned
// because its context ended also matches context.Canceled or
// context.DeadlineExceeded, and carries the last error seen (or
// REQUEST_TIMED_OUT). Calls on a closed Client, Producer, Consumer or Admin
// match ErrClosed.
//
// # Producer
//
// ProduceAsync picks the partition (ManualPartition, else murmur2 of the
// key as Kafka's default partitioner, else a sticky partition that moves on
// when its batch fills), adds the record to that partition's open batch,
// encoded in the log's format, and returns. A batch is sent when it is full
// (batch.size, 65536 bytes: see DefaultBatchSize), when it has waited
// linger.ms (5 ms, the Kafka 4.0 default), when buffer.memory is spent (a record waits for room,
// so nothing more can join before an answer frees some: Kafka's accumulator sends then too), or
// on Flush and Close, as the raw record_batch of one ProduceRequest. Every record gets exactly one callback: its offset, or an
// error with a code. Produce is the synchronous form. A batch of several
// records that the leader refuses as too large (MESSAGE_TOO_LARGE or
// RECORD_LIST_TOO_LARGE: the topic's max.message.bytes is below batch.size)
// is split in two and each half sent again, until it fits, as Kafka's
// producer does; a single record that is too large fails with that code.
//
// Defaults follow Kafka's producer: acks=all, enable.idempotence=true,
// max.in.flight.requests.per.connection=5 (here per partition), retries
// unlimited within delivery.timeout.ms, buffer.memory 32 MiB, max.block.ms
// 60000. Setting IdempotenceOn together with acks other than all, or more
// than 5 in flight, is an INVALID_CONFIG error naming the option; left at
// IdempotenceDefault, such settings turn idempotence off, as in Kafka.
//
// With idempotence the producer takes a producer id once (InitProducerId)
// and numbers each partition's records. Up to 5 batches per partition are
// in flight; a retriable failure resends the batch, and the later ones, in
// order with their original sequence numbers, and a DUPLICATE answer is
// success with the original offsets. Concurrent gRPC calls may reach the
// broker in any order; the broker refuses a batch that overtook an earlier
// one with OUT_OF_ORDER_SEQUENCE_NUMBER, and the producer resends it in
// turn. Until the leader has acknowledged one batch under the current
// producer id and epoch it does not know the producer and would accept any
// sequence, so only one batch is in flight until then. When a partition's
// sequence is broken (the leader lost the producer's state, or a sent batch
// failed for good) the partition restarts under a bumped epoch; see
// partition_settle.go for the rules that keep this free of duplicates. A
// batch that may already be written is not resent under the new epoch
// until the log shows it is not there (partition_written.go): found, it
// is acknowledged at its offset; if the log cannot be read it fails with
// the leader's code (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER),
// saying it may or may not have been written.
// Within those rules the log holds each record once, in the order produced.
//
// Without idempotence a retry after an ambiguous failure (a timeout after
// the append) writes the record twice. Nor does anything keep concurrent
// requests in order (a gRPC server handles them in no particular order),
// so without idempotence MaxInFlight defaults to 1; set higher, batches of
// a partition may be appended out of order.
//
// # Consumer
//
// A Consumer reads one partition from its position up to the high
// watermark: Poll fetches raw batches, decodes them client-side (checking
// their CRC), skips the records of a batch below the position, and advances
// the position. OFFSET_OUT_OF_RANGE is returned or, with a Reset policy,
// moves the position to the earliest or latest offset; so does a topic
// deleted and created again, known by its new topic id (TopicRecreated).
// With Rack set, the leader may name a replica in that rack (KIP-392); the
// consumer fetches from it until it fails, then goes back to the leader;
// a replica that did not answer also has the metadata refreshed, which
// gives its address anew should it have moved. A failed replica is avoided
// for a pause from retry.backoff.max.ms, doubling with each consecutive
// failure up to metadata.max.age; meanwhile fetches leave the rack out, so
// the leader serves them rather than naming the replica again.
//
// # Group consumer
//
// A GroupConsumer is a member of a consumer group (Kafka's classic
// protocol): a goroutine of its own finds the coordinator, joins, syncs
// and heartbeats; the leader member computes the assignment with an
// assign.Assignor. Partitions change hands only inside Poll and Close,
// where the rebalance callbacks run and positions are committed before
// partitions are revoked. See DESIGN.md, "Consumer groups: the client
// side".
//
// # Admin
//
// Admin wraps AdminService. It finds the active controller among the given
// addresses, follows NOT_CONTROLLER answers to the controller they name
// (or tries the next address when they name none) and retries retriable
// codes. WatchCluster reconnects the same way.
//
// # Concurrency
//
// Client, Producer and Admin are safe for concurrent use. A Consumer
// serializes its methods with its own lock; Poll holds it throughout.
//
// Goroutines: a Producer runs two per partition it has written to:
// partitionProducer.run, which makes every sending decision and runs the
// callbacks of that partition in order, and its writer (writeLoop), which
// puts the partition's requests on its leader's produce stream; while
// they run, one per InitProducerId request and per log lookup
// (partition_written.go); and one per request whose context ends before
// its answer (the watch that answers it). The Client runs one receiver per
// produce stream, one per broker written to. A GroupConsumer runs its
// membership goroutine, one fetcher per assigned partition and one per
// commit in flight (CommitAsync, the auto-commit; at most one at a time,
// later CommitAsync calls queue), which then runs that commit's CommitAsync
// callbacks. Consumer starts none; WatchCluster runs in the caller's loop,
// with one goroutine per stream that watches it for silence. gRPC runs its
// own, which closing a connection ends.
//
// Close (Producer, GroupConsumer and its Abandon, Client, Admin) returns
// only once every goroutine the closed value started has ended, and so
// does a WatchCluster iteration: a program that looks for leaked
// goroutines, or stops its cluster, right after finds none of the
// client's. What Close gives up on (its ctx ended) it cancels first, and a
// canceled call returns without waiting for the broker, so a stalled
// broker does not hold Close past that bound; only a callback that does
// not return does. GroupConsumer.Close and Abandon wait for the CommitAsync
// callbacks too, but for the one they are called from: a callback may
// close its own consumer (callbacks.go).
//
// Locks: Producer.mu guards the partition map and the sticky partitions;
// partitionProducer.mu guards one partition's batches and sequence state;
// metadata.mu the cache; producerIDs.mu the shared producer id; memLimiter.mu
// the buffer budget; connPool.mu the connections; Admin.mu the active
// controller; Consumer.mu the consumer's position. The only nesting is
// Consumer.mu before metadata.mu; every other lock is held alone, never
// across a network call, and no callback runs under a lock. Callbacks must
// be quick and must not call Produce, Flush or Close.
package client

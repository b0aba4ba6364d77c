// Package ctrl is one term of office of the active controller: Kafka's
// ZooKeeper-mode KafkaController with etcd (package metastore) in
// ZooKeeper's place.
//
// Start is called once a controller process has won the election
// (metastore.Session). It loads the cluster from etcd, makes the elections
// the cluster needs, pushes the full state to every live broker, and then
// processes events one at a time until it steps down.
//
// # The event loop
//
// One goroutine, the loop, owns all of the term's state: live brokers and
// their senders, topics, assignments and partition states, configs, broker
// sessions and their progress reports, pending fast-failover checks, the
// event ring and the WatchCluster subscribers. Nothing else reads or writes
// it. Everything that happens reaches the loop as a func on one channel and
// runs there in arrival order:
//
//   - broker registrations and departures (etcd watch), config and
//     controller-node changes (etcd watches);
//   - BrokerSession streams opening, reporting, breaking; fast-failover
//     timers and health probes;
//   - AlterPartition, ControlledShutdown and every admin request;
//   - the auto leader rebalance timer;
//   - a broker answering STALE_CONTROLLER_EPOCH, and the session's lease
//     being lost.
//
// Requests from gRPC handlers use call: they queue a func and wait for it to
// run (or for the term to end, which answers NOT_CONTROLLER). Slow waits that
// need no state (CreateTopics waiting for leaders, producer id allocation,
// health probes) happen outside the loop.
//
// # Core and shell
//
// The term's decisions are made by core (core.go): a value that holds the
// decision state (brokers, topics, assignments, partition states, offline
// log dirs, broker sessions, their progress reports and fast-failover
// checks) and turns events (the cluster loaded at election, a broker
// registered or departed, a topic or broker config changed, a session
// opened, reporting or broken, a probe's outcome, AlterPartition,
// ControlledShutdown, AlterPartitionReassignments, ElectLeaders,
// DeleteTopics, CreateTopics, the offsets topic's creation,
// CreatePartitions, AlterConfigs, a timer it armed firing, the result of a
// write or read it asked for) into effects (etcd writes and reads, pushes to
// brokers, senders to start or stop, timers to arm or stop, probes to run,
// sessions to end, answers, cluster events, step-down). It has no
// goroutines, does no I/O and reads no clock; placement's random choices
// come from a seeded source it is given. Its scripted tests are
// testdata/*.txt (script_test.go). Active embeds it and is the shell
// (shell.go): it turns what reaches the loop into core events, executes the
// effects in order on the loop, and feeds each write's outcome back as an
// event.
//
// # Write, then push
//
// Every decision is written to etcd first, through the session's fenced
// transaction (F22), and only then pushed to brokers. In the core a write
// (or read) is the last effect of its batch: what follows it (pushes, the
// answer, the next item of a request) is a continuation that runs only when
// the result comes back, so at most one is in flight and nothing is pushed
// before the write is confirmed. If the write is refused because the
// controller moved (metastore.ErrControllerMoved), or fails in any other way
// that leaves the outcome unknown, the term steps down without pushing: the
// next controller reloads etcd. A broker answering STALE_CONTROLLER_EPOCH
// also ends the term.
//
// # Goroutines and blocking rules
//
// Besides the loop, a term runs: one sender goroutine per live broker
// incarnation (package sender), one reader per etcd watch, a watcher of the
// session's lease, the timers the core armed (each posts an event when it
// fires), and short-lived helpers (health probes, ack waiters). Helpers post
// results back with post, which gives up once the loop has exited. The loop
// never waits for another goroutine of the term, so a helper blocked posting
// cannot deadlock it; the term's cleanup waits for them only after the loop
// has exited. There are no mutexes on the state; the only shared fields are
// channels, the immutable Deps, and atomics (failover figures); hooks.go
// holds the test hooks that stall the loop and hold the senders.
package ctrl

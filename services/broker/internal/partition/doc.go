// Package partition is the replica state machine of one partition on one
// broker: Kafka's data-plane replication decisions (high watermark, ISR
// shrink and expand, leader epochs, fetch validation, follower truncation,
// produce acknowledgement) with no goroutines, no I/O, no locks and no clock
// of its own.
//
// Every input, the time included, is an argument and every decision is a
// return value the broker acts on: record an epoch in the log's epoch cache,
// send an AlterPartition, truncate the log, answer a client. The log itself
// stays outside; the package sees it only through offsets passed in and the
// small EpochSource interface.
//
// A Partition is not safe for concurrent use; the broker serialises calls.
//
// # Driving it
//
// Metadata: MakeLeader or MakeFollower on every partition state from the
// controller. A leader with RoleChange.NewLeaderEpoch records
// (LeaderEpoch, EpochStartOffset) in the epoch cache before any append; a
// follower with NewLeaderEpoch (re)starts fetching with StartFetching.
//
// Produce (leader): BeforeAppend, append to the log, OnLocalAppend with the
// new LEO; for acks=-1 park the request and call ProduceDone whenever the HW
// advances (HWUpdate.Advanced) or leadership changes.
//
// Follower fetch (leader): ValidateFetch; read the leader's LEO; if the
// request has a LastFetchedEpoch, CheckDivergence (a divergence is answered
// with no records and nothing recorded); read the log; UpdateFollowerFetch.
// Send any returned Proposal as AlterPartition, then feed the answer to
// HandleAlterPartition (resending on AlterRetry).
//
// Timer (leader): MaybeShrinkISR every replica.lag.time.max.ms / 2.
//
// Consumer fetch: ValidateRead, read up to MaxReadableOffset, and on the
// leader PreferredReadReplica for clients that send a rack.
//
// Fetch response (follower): append the records, then OnFetchResponse with
// the leader's HW; on a DivergingEpoch OnDivergingEpoch, truncate, then
// OnTruncated; on OFFSET_OUT_OF_RANGE OutOfRange.
//
// Comments cite the replication rule they implement (F5, F8, ...) and the
// Kafka change it comes from (KIP-101, KAFKA-7128, ...); DESIGN.md section 3
// lists them.
package partition

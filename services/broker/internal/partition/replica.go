package partition

// follower is the leader's view of one follower (Kafka's Replica state).
// Times are milliseconds; zero means "never".
type follower struct {
	id       int32
	leo      int64 // UndefinedOffset until its first fetch in this leadership
	logStart int64
	// lastCaughtUpMs is the largest time t such that the follower's last
	// fetch offset was >= the leader's LEO at t (F8).
	lastCaughtUpMs int64
	// trackedSinceMs is when this leadership began to track the follower
	// (the leader's election, or the follower's addition). Reports count
	// the age of a follower not caught up since then from it: zero above
	// would date it to 1970 (see Snapshot).
	trackedSinceMs int64
	// lastFetchLeaderLEO and lastFetchMs remember the previous fetch, for
	// F8's "caught up with the previous fetch" rule (KAFKA-4485).
	lastFetchLeaderLEO int64
	lastFetchMs        int64
	// brokerEpoch is the epoch the follower's last fetch carried
	// (-1: none sent); hasFetched tells a real -1 from "no fetch yet".
	brokerEpoch int64
	hasFetched  bool
}

func newFollower(id int32, nowMs int64) *follower {
	return &follower{id: id, leo: UndefinedOffset, logStart: UndefinedOffset, brokerEpoch: -1, trackedSinceMs: nowMs}
}

// recordFetch applies F8 (Kafka's Replica.updateFetchStateOrThrow).
// leaderLEO is the leader's LEO read before the log read, so appends that
// race with the read do not hold the follower back.
func (f *follower) recordFetch(fetchOffset, logStart, leaderLEO, nowMs, brokerEpoch int64) {
	switch {
	case fetchOffset >= leaderLEO:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, nowMs)
	case fetchOffset >= f.lastFetchLeaderLEO:
		// Caught up with what the leader had at the previous fetch: a
		// follower under a steady stream of small produces never reaches
		// the live LEO but is not lagging.
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.lastFetchMs)
	}
	f.leo = fetchOffset
	f.logStart = logStart
	f.lastFetchLeaderLEO = max(f.lastFetchLeaderLEO, leaderLEO)
	f.lastFetchMs = nowMs
	f.brokerEpoch = brokerEpoch
	f.hasFetched = true
}

// reset is Kafka's resetReplicaState, run when this broker starts a new
// leader epoch as leader (F8): ISR members start caught up "now", others at
// zero, so they cannot rejoin before they fetch again.
func (f *follower) reset(nowMs, leaderLEO int64, newLeader, inISR bool) {
	var caughtUp int64
	if inISR {
		caughtUp = nowMs
	}
	if newLeader {
		// Whatever we knew from an earlier leadership is stale.
		*f = follower{
			id:                 f.id,
			leo:                UndefinedOffset,
			logStart:           UndefinedOffset,
			lastFetchLeaderLEO: UndefinedOffset,
			lastCaughtUpMs:     caughtUp,
			trackedSinceMs:     nowMs,
			brokerEpoch:        -1,
		}
		return
	}
	f.lastFetchLeaderLEO = leaderLEO
	f.lastFetchMs = caughtUp
	f.lastCaughtUpMs = caughtUp
}

// caughtUpAgeMs is how long ago the follower was last caught up, as
// reported: for one not caught up since this leadership began to track it,
// the time since then, a lower bound (the ISR rule itself still counts
// from zero, as Kafka's).
func (f *follower) caughtUpAgeMs(nowMs int64) int64 {
	return nowMs - max(f.lastCaughtUpMs, f.trackedSinceMs)
}

// caughtUp is Kafka's ReplicaState.isCaughtUp: at the leader's LEO, or
// caught up within the last maxLagMs (F7).
func (f *follower) caughtUp(leaderLEO, nowMs, maxLagMs int64) bool {
	return f.leo == leaderLEO || nowMs-f.lastCaughtUpMs <= maxLagMs
}

// FollowerLEO is follower id's log end offset as its last fetch in this
// leadership told the leader; false when it has not fetched yet, or is no
// follower here.
func (p *Partition) FollowerLEO(id int32) (int64, bool) {
	f := p.followers[id]
	if p.role != RoleLeader || f == nil || f.leo == UndefinedOffset {
		return 0, false
	}
	return f.leo, true
}

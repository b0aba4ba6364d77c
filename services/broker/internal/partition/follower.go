package partition

// OnFetchResponse applies a fetch response on a follower after its records
// were appended: the follower's HW is the leader's HW clamped to its own
// [log start, LEO] (F6). It lags the leader's by one fetch round trip, and it
// may go down (after an unclean election the new leader's HW can be lower).
func (p *Partition) OnFetchResponse(leaderHW, localLEO int64) HWUpdate {
	p.leo = localLEO
	u := HWUpdate{Before: p.hw}
	if p.role == RoleFollower {
		p.hw = leaderHW
	}
	p.clampHW()
	u.After = p.hw
	return u
}

// OnTruncated records that the log was truncated to newLEO; a HW above it
// comes down with it (Kafka's updateLogEndOffset).
func (p *Partition) OnTruncated(newLEO int64) HWUpdate {
	u := HWUpdate{Before: p.hw}
	p.leo = newLEO
	p.clampHW()
	u.After = p.hw
	return u
}

// FetchStart is how a follower begins fetching in a new leader epoch.
type FetchStart struct {
	Mode TruncationMode
	// TruncateTo is the offset to truncate the log to before the first
	// fetch, UndefinedOffset for none.
	TruncateTo int64
	// FetchOffset is the first fetch's offset.
	FetchOffset int64
	// LastFetchedEpoch is sent in the fetch so the leader can detect
	// divergence (F13); NoEpoch sends none.
	LastFetchedEpoch int32
}

// StartFetching decides the first fetch after MakeFollower reported a new
// leader epoch (or after a restart), by the configured truncation mode.
//
// In leader-epoch mode nothing is cut up front: the follower fetches from its
// LEO with its latest epoch and the leader answers with a DivergingEpoch if
// the logs differ (F13, KIP-595). With an empty epoch cache there is nothing
// to compare, and Kafka falls back to the HW (F12).
//
// In high-watermark mode the follower truncates to its own HW, as Kafka did
// before 0.11. That discards records above the HW that the leader may have
// acknowledged: KIP-101's scenario 1.
func (p *Partition) StartFetching(epochs EpochSource) FetchStart {
	mode := p.cfg.Truncation
	latest := UndefinedEpoch
	if mode == TruncateLeaderEpoch {
		latest = epochs.LatestEpoch()
	}
	if latest == UndefinedEpoch {
		fs := FetchStart{Mode: mode, TruncateTo: UndefinedOffset, FetchOffset: p.hw, LastFetchedEpoch: NoEpoch}
		if p.hw < p.leo {
			fs.TruncateTo = p.hw
		}
		return fs
	}
	return FetchStart{Mode: mode, TruncateTo: UndefinedOffset, FetchOffset: p.leo, LastFetchedEpoch: latest}
}

// OnDivergingEpoch decides the truncation for a leader's DivergingEpoch or
// OffsetsForLeaderEpoch answer, from this follower's epoch cache and LEO
// (F12, KIP-279). In high-watermark mode no epochs are consulted: the
// answer is the HW.
func (p *Partition) OnDivergingEpoch(leader EpochEndOffset, epochs EpochSource) Truncation {
	if p.cfg.Truncation == TruncateHighWatermark {
		return Truncation{Offset: min(p.hw, p.leo), Done: true}
	}
	return TruncationFor(leader, epochs, p.leo, p.hw)
}

// leaderEpochEnd is a leader's answer to where a follower's latest epoch
// (asked) ends, when the leader holds no record of it: its largest epoch
// below, and the offset where its next epoch, newer than asked, starts.
type leaderEpochEnd struct {
	known       bool
	leaderEpoch int32 // the leader epoch it was answered in
	asked       int32
	end         EpochEndOffset
}

// OnLeaderEpochEnd records the leader's answer for asked once the
// follower's truncation to it is settled. After an unclean election the
// follower's log no longer holds the epochs it lost, and on a quiet
// partition no record of the new leader's epoch follows: a consumer that
// read them here would get OFFSET_OUT_OF_RANGE (its epoch unknown) and
// reset by policy. The leader's answer tells where the logs part.
func (p *Partition) OnLeaderEpochEnd(asked int32, leader EpochEndOffset) {
	if p.role != RoleFollower || leader.Epoch == UndefinedEpoch || leader.EndOffset == UndefinedOffset || leader.Epoch >= asked {
		return
	}
	p.leaderEnd = leaderEpochEnd{known: true, leaderEpoch: p.leaderEpoch, asked: asked, end: leader}
}

// withLeaderEnd answers, for an epoch the local cache does not know, from
// the leader's answer: no epoch of the leader's lies between its answer's
// epoch and the one asked.
type withLeaderEnd struct {
	EpochSource
	end leaderEpochEnd
}

func (w withLeaderEnd) EndOffsetFor(epoch int32) (int32, int64) {
	e, end := w.EpochSource.EndOffsetFor(epoch)
	if e == UndefinedEpoch && w.end.end.Epoch <= epoch && epoch <= w.end.asked {
		return w.end.end.Epoch, w.end.end.EndOffset
	}
	return e, end
}

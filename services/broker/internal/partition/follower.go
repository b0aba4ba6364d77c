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

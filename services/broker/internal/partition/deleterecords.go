package partition

import "tidemark.io/services/platform/kerr"

// DeleteToHighWatermark is DeleteRecords' offset -1: delete up to the HW.
const DeleteToHighWatermark = -1

// DeleteRecordsOffset checks a DeleteRecords request on this replica and
// returns the log start offset it asks for (KIP-107, Kafka's
// Partition.deleteRecordsOnLeader): only the leader deletes; -1 is the HW;
// any other negative offset, or one past the HW, is OFFSET_OUT_OF_RANGE.
// An offset at or below the current log start is no error: the log start
// never goes back, and the request is answered once the low watermark is
// there.
func (p *Partition) DeleteRecordsOffset(offset int64) (int64, error) {
	if p.role != RoleLeader {
		return 0, p.notLeader("broker %d is not the leader (leader %d, leader epoch %d)", p.cfg.LocalID, p.leader, p.leaderEpoch)
	}
	if offset == DeleteToHighWatermark {
		offset = p.hw
	}
	if offset < 0 {
		return 0, kerr.New(kerr.OffsetOutOfRange, "offset %d is neither -1 (the high watermark) nor an offset", offset)
	}
	if offset > p.hw {
		return 0, kerr.New(kerr.OffsetOutOfRange, "offset %d is beyond the high watermark %d", offset, p.hw)
	}
	return offset, nil
}

// LowWatermark is the lowest log start offset among the leader and the
// followers on brokers alive says are live, as their last fetches in this
// leadership told it (Kafka's lowWatermarkIfLeader): a live follower that
// has not fetched yet counts as UndefinedOffset, below every offset. A
// DeleteRecords request is answered when it reaches the requested offset.
func (p *Partition) LowWatermark(alive func(id int32) bool) (int64, error) {
	if p.role != RoleLeader {
		return 0, p.notLeader("broker %d is not the leader (leader %d, leader epoch %d)", p.cfg.LocalID, p.leader, p.leaderEpoch)
	}
	low := p.logStart
	for _, id := range p.replicas {
		f := p.followers[id]
		if id == p.cfg.LocalID || f == nil || (alive != nil && !alive(id)) {
			continue
		}
		low = min(low, f.logStart)
	}
	return low, nil
}

package partition

import "tidemark.io/services/platform/kerr"

// CheckAcks accepts the three acks values Kafka knows (F15): 0 (no
// response), 1 (leader append) and -1 (all of the ISR).
func CheckAcks(acks int16) error {
	switch acks {
	case 0, 1, -1:
		return nil
	}
	return kerr.BadField(kerr.InvalidRequiredAcks, "acks", "%d is not 0, 1 or -1", acks)
}

// BeforeAppend is the produce check before anything is written (F15, F16):
// only the leader appends, and with acks=-1 the committed ISR must hold at
// least the effective min ISR, or the write is refused with
// NOT_ENOUGH_REPLICAS and the log is untouched.
func (p *Partition) BeforeAppend(acks int16) error {
	if err := CheckAcks(acks); err != nil {
		return err
	}
	if p.role != RoleLeader {
		return p.notLeader("broker %d is not the leader (leader %d, leader epoch %d)", p.cfg.LocalID, p.leader, p.leaderEpoch)
	}
	if acks == -1 && len(p.isr) < p.EffectiveMinISR() {
		return kerr.New(kerr.NotEnoughReplicas, "ISR size %d (ISR %s) is below min.insync.replicas %d (effective %d)",
			len(p.isr), FormatIDs(p.isr), p.cfg.MinInsyncReplicas, p.EffectiveMinISR())
	}
	return nil
}

// ProduceDone says whether an acks=-1 produce whose last offset is
// requiredOffset-1 can be answered (F15, F16, F17; Kafka's
// checkEnoughReplicasReachOffset). It is done once the HW reaches
// requiredOffset; if the maximal ISR has meanwhile shrunk below the effective
// min ISR the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND: the records are in
// the log and a retry duplicates them unless the producer is idempotent.
// A replica that lost leadership answers NOT_LEADER_OR_FOLLOWER at once.
func (p *Partition) ProduceDone(requiredOffset int64) (bool, error) {
	if p.role != RoleLeader {
		return true, p.notLeader("broker %d is no longer the leader (leader %d, leader epoch %d)", p.cfg.LocalID, p.leader, p.leaderEpoch)
	}
	if p.hw < requiredOffset {
		return false, nil
	}
	if maximal := p.maximalISR(); len(maximal) < p.EffectiveMinISR() {
		return true, kerr.New(kerr.NotEnoughReplicasAfterAppend,
			"offset %d is committed but ISR size %d (ISR %s) is below min.insync.replicas %d (effective %d)",
			requiredOffset-1, len(maximal), FormatIDs(maximal), p.cfg.MinInsyncReplicas, p.EffectiveMinISR())
	}
	return true, nil
}

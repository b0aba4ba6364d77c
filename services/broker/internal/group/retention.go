package group

import "time"

// offsetExpiry is how a group's committed offsets expire: Kafka's
// offsetExpirationCondition of a classic group, which depends on its
// protocol type and state.
type offsetExpiry struct {
	// applies is false when none of the group's offsets expire now.
	applies bool
	// from, when set, is where every offset's retention counts from (when
	// the group became Empty); unset, each counts from its commit.
	from time.Time
	// kept are the topics whose offsets do not expire: those a Stable
	// consumer group's members subscribe to.
	kept map[string]bool
}

// offsetExpiry is the rule for g's offsets, as Kafka's:
//   - no protocol type (only ever committed to from outside, a "simple"
//     consumer): each offset retention after its commit;
//   - Empty: every offset retention after the group became Empty (KIP-211),
//     or after its commit when that moment is unknown (a record that did
//     not carry it). A later commit from outside does not move it;
//   - Stable consumer group whose subscriptions are known: the offsets of
//     the topics no member subscribes to, retention after their commit;
//   - otherwise (a rebalance, another protocol type, subscriptions that
//     cannot be read): none.
func (g *Group) offsetExpiry() offsetExpiry {
	switch {
	case g.ProtocolType == "":
		return offsetExpiry{applies: true}
	case g.State == Empty:
		return offsetExpiry{applies: true, from: g.StateSince}
	case g.ProtocolType == ConsumerProtocolType && g.State == Stable && g.subscribed != nil:
		return offsetExpiry{applies: true, kept: g.subscribed}
	}
	return offsetExpiry{}
}

// expired reports whether the offset of tp has expired at now, as Kafka's
// OffsetExpirationConditionImpl: a commit that asked for a retention of its
// own expires at its expire timestamp; any other once retention has passed
// since the rule's base time. Both bounds are inclusive, in milliseconds.
func (r offsetExpiry) expired(tp TP, o OffsetValue, now time.Time, retention time.Duration) bool {
	if !r.applies || r.kept[tp.Topic] {
		return false
	}
	if o.ExpireTimestamp != 0 {
		return now.UnixMilli() >= o.ExpireTimestamp
	}
	base := o.CommitTimestamp
	if !r.from.IsZero() {
		base = r.from.UnixMilli()
	}
	return now.UnixMilli()-base >= retention.Milliseconds()
}

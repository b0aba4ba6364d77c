package grpcapi

import (
	"context"
	"time"

	"tidemark.io/services/broker/internal/quota"
	"tidemark.io/services/platform/identity"
)

// throttle records n bytes of kind against the caller's principal and, when
// that puts it over its byte-rate quota, holds the answer back for the
// throttle time (as Kafka delays a throttled client's response) and returns
// it in ms for the answer's throttle_time_ms. The request itself has been
// served: being over quota delays, it never fails.
func (b *Broker) throttle(ctx context.Context, kind quota.Kind, n int) int32 {
	if b.Quotas == nil || n == 0 {
		return 0
	}
	c := quota.FromBroker(kind, b.RM.BrokerConfig())
	d := b.Quotas.Record(kind, c, identity.FromContext(ctx).Name, n)
	if d <= 0 {
		return 0
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return int32(max(d.Milliseconds(), 1))
}

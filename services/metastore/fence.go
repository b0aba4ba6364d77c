package metastore

import (
	"context"
	"fmt"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// fenceCmps is how many compares (and read-backs) the fence adds to a txn.
const fenceCmps = 2

// fence is the condition on every controller write: controller_epoch has not
// moved since this session won it (Kafka's zkVersion check on
// /controller_epoch), and the controller key is still held by this session's
// lease. The second compare also stops a controller whose lease has expired
// before any successor has been elected.
func (s *Session) fence() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(s.s.k.controllerEpoch()), "=", s.epochRev),
		clientv3.Compare(clientv3.LeaseValue(s.s.k.controller()), "=", int64(s.lease)),
	}
}

// commit runs If(fence, cmps...) Then(ops...) Else(fence reads, elseOps...).
// If the fence failed it returns a *ControllerMovedError and nothing was
// written. If only cmps failed it returns the response with Succeeded false;
// the answers to elseOps start at resp.Responses[fenceCmps].
func (s *Session) commit(ctx context.Context, cmps []clientv3.Cmp, ops, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	k := s.s.k
	resp, err := s.s.cli.Txn(ctx).
		If(append(s.fence(), cmps...)...).
		Then(ops...).
		Else(append([]clientv3.Op{clientv3.OpGet(k.controller()), clientv3.OpGet(k.controllerEpoch())}, elseOps...)...).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("metastore: controller write: %w", err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	v, err := s.s.controllerFrom(resp.Header.Revision, resp.Responses[0], resp.Responses[1])
	if err != nil {
		return nil, err
	}
	if v.epochRev == s.epochRev && v.info != nil && ownedBy(resp.Responses[0], s.lease) {
		return resp, nil // the fence held; a caller's own compare failed
	}
	moved := &ControllerMovedError{Epoch: s.info.Epoch, CurrentEpoch: v.epoch, Current: v.info}
	s.s.log.Warn("fenced write refused", slog.Int("epoch", int(s.info.Epoch)),
		slog.Int("current_epoch", int(v.epoch)), slog.Bool("controller_present", v.info != nil))
	return nil, moved
}

func ownedBy(get *pbResponseOp, lease clientv3.LeaseID) bool {
	kvs := get.GetResponseRange().GetKvs()
	return len(kvs) == 1 && kvs[0].Lease == int64(lease)
}

package metastore

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrCompacted is reported (errors.Is) by a watch that asked for revisions
// etcd has already compacted away: reload with LoadCluster and watch again.
var ErrCompacted = rpctypes.ErrCompacted

// WatchResponse is one batch of changes, all at or below Revision. Changes
// made by one transaction arrive in one batch.
type WatchResponse struct {
	Revision int64
	Events   []Event
	// Err ends the watch: the channel is closed after this response.
	Err error
}

// Watch reports every change under the prefix from revision fromRev on (0:
// from now). A controller calls it with LoadCluster's Revision+1 and applies
// the events to its Cluster. The channel closes when ctx ends or the watch
// fails (the last response then carries Err). The watch fails rather than
// waits if etcd loses its raft leader. A watch that hears nothing from etcd
// for the watch timeout (Options.WatchTimeout) is presumed cut off and
// watched again on a new connection, missing and repeating nothing.
func (s *Store) Watch(ctx context.Context, fromRev int64) <-chan WatchResponse {
	return s.watch(ctx, s.k.all(), fromRev)
}

// WatchPrefix reports every change under prefix (one of the Store's
// *Prefix) from fromRev on; a put's value is in Event.Raw.
func (s *Store) WatchPrefix(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	return s.watch(ctx, prefix, fromRev)
}

// WatchBrokers reports broker registrations and departures from fromRev on.
// A departure's event carries the departed registration (with its epoch).
func (s *Store) WatchBrokers(ctx context.Context, fromRev int64) <-chan WatchResponse {
	return s.watch(ctx, s.k.brokersDir(), fromRev)
}

// WatchConfigs reports topic and broker config changes from fromRev on.
func (s *Store) WatchConfigs(ctx context.Context, fromRev int64) <-chan WatchResponse {
	return s.watch(ctx, s.k.configDir(), fromRev)
}

// WatchController reports controller elections and departures from fromRev on.
func (s *Store) WatchController(ctx context.Context, fromRev int64) <-chan WatchResponse {
	return s.watch(ctx, s.k.controller(), fromRev)
}

func (s *Store) watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	out := make(chan WatchResponse, 16)
	r := watchRange{key: prefix, prevKV: true}
	if prefix != s.k.controller() {
		r.end = clientv3.GetPrefixRangeEnd(prefix)
	}
	if fromRev <= 0 {
		// From now: the revision read here, so that a watch opened again
		// later knows where it started.
		resp, err := s.cli.Get(ctx, prefix, clientv3.WithCountOnly())
		if err != nil {
			if ctx.Err() == nil {
				out <- WatchResponse{Err: fmt.Errorf("metastore: watch %s: %w", prefix, err)}
			}
			close(out)
			return out
		}
		fromRev = resp.Header.Revision + 1
	}
	// Progress notifications move the resume revision on while the prefix
	// is quiet: without them a watch that reconnects (an etcd restart, a
	// link blip) resumes from fromRev, which the periodic compactor has
	// long removed, and fails with ErrCompacted although it missed nothing.
	// liveWatch asks for them.
	in := s.liveWatch(clientv3.WithRequireLeader(ctx), r, fromRev)
	go func() {
		defer close(out)
		for b := range in {
			resp := WatchResponse{Revision: b.rev}
			if b.err != nil {
				resp.Err = fmt.Errorf("metastore: watch %s: %w", prefix, b.err)
			}
			for _, ev := range b.events {
				resp.Events = append(resp.Events, s.decodeEvent(ev))
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (s *Store) decodeEvent(ev *mvccpb.Event) Event {
	if ev.Type == mvccpb.DELETE {
		return s.decodeKV(EventDelete, string(ev.Kv.Key), ev.Kv.ModRevision, ev.PrevKv)
	}
	return s.decodeKV(EventPut, string(ev.Kv.Key), ev.Kv.ModRevision, ev.Kv)
}

package console

import (
	"bytes"
	"strconv"
)

// A page gets the whole snapshot once (when its event stream opens, or
// with the first snapshot if it opened before there was one), and then
// patches: what changed since the previous snapshot. With thousands
// of partitions a whole snapshot is megabytes, sent on every progress
// report; a patch carries the partitions that moved (a produce touches
// one) and the brokers, topics or controllers only when they changed.
// The hub sends every stream every patch, in order, or drops the stream
// (the browser reconnects and starts from a whole snapshot again).

// snapshotPatch is one patch. Nil sections are unchanged; Partitions are
// the new or changed partitions, whole; Removed the keys ("topic/N") of
// those gone.
type snapshotPatch struct {
	Time        int64             `json:"time"`
	ClusterID   *string           `json:"clusterId,omitempty"`
	Controller  *controllerView   `json:"controller,omitempty"`
	Controllers *[]controllerView `json:"controllers,omitempty"`
	Brokers     *[]brokerView     `json:"brokers,omitempty"`
	Topics      *[]topicView      `json:"topics,omitempty"`
	Partitions  []partitionView   `json:"partitions,omitempty"`
	Removed     []string          `json:"removed,omitempty"`
}

func partitionKey(p partitionView) string { return p.Topic + "/" + strconv.Itoa(int(p.Partition)) }

// differ remembers the encoded sections of the last snapshot.
type differ struct {
	cluster, controller, controllers, brokers, topics []byte
	parts                                             map[string][]byte
}

// next returns the patch from the previous snapshot to s, and remembers s.
func (d *differ) next(s *snapshot) snapshotPatch {
	p := snapshotPatch{Time: s.Time}
	changed := func(prev *[]byte, v any) bool {
		b := mustJSON(v)
		if bytes.Equal(*prev, b) {
			return false
		}
		*prev = b
		return true
	}
	if changed(&d.cluster, s.ClusterID) {
		p.ClusterID = &s.ClusterID
	}
	if changed(&d.controller, s.Controller) {
		p.Controller = &s.Controller
	}
	if changed(&d.controllers, s.Controllers) {
		p.Controllers = &s.Controllers
	}
	if changed(&d.brokers, s.Brokers) {
		p.Brokers = &s.Brokers
	}
	if changed(&d.topics, s.Topics) {
		p.Topics = &s.Topics
	}
	next := make(map[string][]byte, len(s.Partitions))
	for _, pv := range s.Partitions {
		k := partitionKey(pv)
		b := mustJSON(pv)
		next[k] = b
		if !bytes.Equal(d.parts[k], b) {
			p.Partitions = append(p.Partitions, pv)
		}
	}
	for k := range d.parts {
		if _, ok := next[k]; !ok {
			p.Removed = append(p.Removed, k)
		}
	}
	d.parts = next
	return p
}

// reset forgets the last snapshot (the next patch carries everything).
func (d *differ) reset() { *d = differ{} }

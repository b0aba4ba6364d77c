package broker

import (
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/replica"
)

// eventBuffer collects replication events for the controller session. It is
// bounded: when the session is down or slow the oldest events go first, and
// HW advances (frequent under load) are folded to one per partition between
// reports.
type eventBuffer struct {
	mu     lockorder.Mutex[lockorder.Leaf]
	max    int
	list   []*controlv1.ClusterEvent
	hwSeen map[replica.TP]bool
	notify chan struct{}
}

func newEventBuffer(max int) *eventBuffer {
	return &eventBuffer{max: max, hwSeen: map[replica.TP]bool{}, notify: make(chan struct{}, 1)}
}

var eventKinds = map[string]controlv1.EventKind{
	"isr-shrink": controlv1.EventKind_EVENT_KIND_ISR_SHRINK,
	"isr-expand": controlv1.EventKind_EVENT_KIND_ISR_EXPAND,
	"truncation": controlv1.EventKind_EVENT_KIND_TRUNCATION,
	"hw-advance": controlv1.EventKind_EVENT_KIND_HW_ADVANCE,
	"fenced":     controlv1.EventKind_EVENT_KIND_FENCED,

	"log-dir-offline": controlv1.EventKind_EVENT_KIND_LOG_DIR_OFFLINE,
}

// Event implements replica.EventSink.
func (e *eventBuffer) Event(ev replica.Event) {
	e.mu.Lock()
	if ev.Kind == "hw-advance" {
		if e.hwSeen[ev.TP] {
			e.mu.Unlock()
			return
		}
		e.hwSeen[ev.TP] = true
	}
	if len(e.list) >= e.max {
		e.list = e.list[1:]
	}
	e.list = append(e.list, &controlv1.ClusterEvent{
		Time: ev.Time.UnixMilli(), Kind: eventKinds[ev.Kind], Topic: ev.TP.Topic, Partition: ev.TP.Partition,
		Reason: ev.Reason, TraceId: ev.TraceID, LeaderEpoch: ev.LeaderEpoch, Isr: ev.ISR,
	})
	urgent := ev.Kind != "hw-advance"
	e.mu.Unlock()
	if urgent {
		select {
		case e.notify <- struct{}{}:
		default:
		}
	}
}

// drain returns and clears the buffered events.
func (e *eventBuffer) drain() []*controlv1.ClusterEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.list
	e.list = nil
	clear(e.hwSeen)
	return out
}

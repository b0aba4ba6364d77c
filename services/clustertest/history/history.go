// Package history records what a test cluster's clients did and saw while
// faults were injected (every produce attempt and its outcome, every record
// a consumer read, every fault and heal), what the cluster looked like once
// everything was quiet again, and checks the two against what Kafka's
// replication promises: acknowledged writes survive, replicas converge,
// consumers never see a record that later vanishes, the cluster becomes
// whole again within a bound, an idempotent producer writes each record once.
//
// The package holds plain Go values only (no cluster, broker or gRPC type),
// so any runner can fill it: the in-process cluster of services/clustertest
// as well as a runner of real broker processes. Every type marshals to JSON,
// which lets a runner in another process hand a history over in a file.
package history

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// TP names a partition.
type TP struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Acks levels as a producer sends them.
const (
	AcksAll    int32 = -1
	AcksLeader int32 = 1
	AcksNone   int32 = 0
)

// Outcome is what a produce attempt's caller learnt.
type Outcome string

const (
	// Pending: the attempt has not ended yet (a history taken while
	// producing). The checker treats it like Unknown.
	Pending Outcome = ""
	// Acked: the cluster acknowledged the record at Produce.Offset.
	Acked Outcome = "acked"
	// Failed: the cluster answered with an error code (Produce.Err). The
	// record may still have been appended (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
	// a leader that lost office after appending); the checker never
	// requires it absent.
	Failed Outcome = "failed"
	// Unknown: no answer (timeout, connection lost): written or not.
	Unknown Outcome = "unknown"
)

// Produce is one produce attempt of one record. Values are unique across a
// history: the checker identifies records by value.
type Produce struct {
	ID int64 `json:"id"`
	// Producer names the producing client; with Idempotent set, a value of
	// it found twice in a log is a duplicate (check 5).
	Producer   string    `json:"producer"`
	Idempotent bool      `json:"idempotent,omitempty"`
	TP         TP        `json:"tp"`
	Value      string    `json:"value"`
	Acks       int32     `json:"acks"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end,omitzero"`
	Outcome    Outcome   `json:"outcome"`
	// Offset is the acknowledged offset (Outcome Acked).
	Offset int64 `json:"offset"`
	// Err is the error code's name (Failed) or what happened (Unknown).
	Err string `json:"err,omitempty"`
}

func (p Produce) String() string {
	s := fmt.Sprintf("produce#%d %s %q acks=%d by %s [%s..", p.ID, p.TP, p.Value, p.Acks, p.Producer, clock(p.Start))
	switch p.Outcome {
	case Acked:
		return s + fmt.Sprintf("%s] acked at offset %d", clock(p.End), p.Offset)
	case Failed, Unknown:
		return s + fmt.Sprintf("%s] %s: %s", clock(p.End), p.Outcome, p.Err)
	}
	return s + "] pending"
}

// Consume is one record a consumer read. Session numbers a consumer's
// continuous read sessions: within one session offsets must rise (a new
// session begins when the consumer re-seeks, for example after an error
// that made it restart from a committed or earlier position).
type Consume struct {
	Consumer string    `json:"consumer"`
	Session  int64     `json:"session"`
	TP       TP        `json:"tp"`
	Offset   int64     `json:"offset"`
	Value    string    `json:"value"`
	Time     time.Time `json:"time"`
}

func (c Consume) String() string {
	return fmt.Sprintf("%s session %d read %s offset %d = %q at %s", c.Consumer, c.Session, c.TP, c.Offset, c.Value, clock(c.Time))
}

// EventKind classifies an Event.
type EventKind string

const (
	Fault EventKind = "fault" // a fault injected
	Heal  EventKind = "heal"  // a fault repaired
	Note  EventKind = "note"  // anything else worth seeing in a report (an election asked for, a phase)
)

// Event is something the runner did to the cluster.
type Event struct {
	Time time.Time `json:"time"`
	Kind EventKind `json:"kind"`
	What string    `json:"what"`
}

func (e Event) String() string { return fmt.Sprintf("%s %s: %s", clock(e.Time), e.Kind, e.What) }

// History is everything recorded, in recording order.
type History struct {
	Produces []Produce `json:"produces"`
	Consumes []Consume `json:"consumes"`
	Events   []Event   `json:"events"`
}

// Recorder records a history; it is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	now func() time.Time
	h   History
}

// NewRecorder returns an empty recorder stamping with the wall clock.
func NewRecorder() *Recorder { return &Recorder{now: time.Now} }

// Start records a produce attempt about to be sent and returns its id for
// Acked, Failed or Unknown.
func (r *Recorder) Start(producer string, idempotent bool, tp TP, acks int32, value string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := int64(len(r.h.Produces))
	r.h.Produces = append(r.h.Produces, Produce{ID: id, Producer: producer, Idempotent: idempotent, TP: tp,
		Value: value, Acks: acks, Start: r.now()})
	return id
}

func (r *Recorder) end(id int64, o Outcome, offset int64, err string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &r.h.Produces[id]
	p.End, p.Outcome, p.Offset, p.Err = r.now(), o, offset, err
}

// Acked records that attempt id was acknowledged at offset.
func (r *Recorder) Acked(id, offset int64) { r.end(id, Acked, offset, "") }

// Failed records that attempt id ended with an error code (its name, e.g.
// NOT_ENOUGH_REPLICAS).
func (r *Recorder) Failed(id int64, code string) { r.end(id, Failed, -1, code) }

// Unknown records that attempt id ended without an answer.
func (r *Recorder) Unknown(id int64, why string) { r.end(id, Unknown, -1, why) }

// Consumed records a record read by a consumer.
func (r *Recorder) Consumed(consumer string, session int64, tp TP, offset int64, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Consumes = append(r.h.Consumes, Consume{Consumer: consumer, Session: session, TP: tp, Offset: offset, Value: value, Time: r.now()})
}

// Event records a fault, heal or note now and returns its time.
func (r *Recorder) Event(kind EventKind, format string, args ...any) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.h.Events = append(r.h.Events, Event{Time: now, Kind: kind, What: fmt.Sprintf(format, args...)})
	return now
}

// History returns a copy of what has been recorded so far.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{Produces: slices.Clone(r.h.Produces), Consumes: slices.Clone(r.h.Consumes), Events: slices.Clone(r.h.Events)}
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
}

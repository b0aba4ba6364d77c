package history

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Kind names a violation.
type Kind string

const (
	// Check 1: an acknowledged write (of a promised topic) is not in the
	// final log, not at its acknowledged offset, or holds another value.
	LostWrite  Kind = "lost-acked-write"
	MovedWrite Kind = "acked-write-at-other-offset"
	// NoFinalLog: no replica of a partition with promised writes was readable.
	NoFinalLog Kind = "no-readable-replica"
	// Check 2: replicas disagree below the HW, or HW < LEO once quiet.
	Divergence Kind = "replicas-diverge"
	HWBelowLEO Kind = "hw-below-leo"
	// Check 3: a consumer saw an offset go backwards (or repeat) within one
	// session, or read a record the final log does not hold at that offset.
	ReadBackwards Kind = "read-offset-backwards"
	VanishedRead  Kind = "read-record-vanished"
	// PhantomRecord: a log or a consumer holds a value nobody produced.
	PhantomRecord Kind = "phantom-record"
	// Check 4: a partition not whole within the liveness bound.
	NotLive Kind = "not-live"
	// Check 5: an idempotent producer's record is in the log twice.
	Duplicate Kind = "duplicate"
	// NotLinearizable: porcupine found no order of the partition's produces
	// and reads that an append-only log explains.
	NotLinearizable Kind = "not-linearizable"
	// ReusedValue: two produce attempts wrote the same value. Every check
	// finds a record by its value, so a reused one makes their verdicts
	// meaningless (a read of one attempt's record judged against the
	// other's times): the workload's fault, reported as such.
	ReusedValue Kind = "reused-value"
)

// Options say what the run promised and how to check it.
type Options struct {
	// Durable lists the topics whose acknowledged acks=all writes must
	// survive: min.insync.replicas >= 2 and unclean election off (see
	// Promised). Acknowledged writes of other topics only count in the
	// statistics.
	Durable map[string]bool
	// AcksOneDurable promises acks=1 writes of the Durable topics as well.
	AcksOneDurable bool
	// Retention lists the topics whose records may be deleted below the
	// log start (retention.ms, retention.bytes, DeleteRecords). Elsewhere
	// nothing may leave a log: an acknowledged write or a read below a
	// replica's log start is missing, not expired.
	Retention map[string]bool
	// LivenessBound: every partition must be whole within it after
	// Final.FaultsStopped. Zero skips the liveness check.
	LivenessBound time.Duration
	// EventWindow is how far around a violation events are listed
	// (default 5s).
	EventWindow time.Duration
	// LinearizableOps caps the operations per partition given to the
	// linearizability checker (default 3000; -1 skips it), and
	// LinearizableTimeout bounds its search per run (default 5s).
	LinearizableOps     int
	LinearizableTimeout time.Duration
}

// Promised reports whether a topic's configuration promises that
// acknowledged acks=all writes survive any single failure.
func Promised(minInsyncReplicas int, uncleanElection bool) bool {
	return minInsyncReplicas >= 2 && !uncleanElection
}

// Violation is one broken promise.
type Violation struct {
	Kind    Kind      `json:"kind"`
	TP      TP        `json:"tp"`
	Offset  int64     `json:"offset"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
	// Records are the offending operations and log records, described.
	Records []string `json:"records,omitempty"`
	// Events are the runner's events around At.
	Events []Event `json:"events,omitempty"`
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: %s", v.Kind, v.TP, v.Message)
	for _, r := range v.Records {
		fmt.Fprintf(&b, "\n      %s", r)
	}
	if len(v.Events) > 0 {
		b.WriteString("\n    around it:")
		for _, e := range v.Events {
			fmt.Fprintf(&b, "\n      %s", e)
		}
	}
	return b.String()
}

// Stats counts what a run did.
type Stats struct {
	Produces int `json:"produces"`
	Acked    int `json:"acked"`
	AckedAll int `json:"acked_all"`
	Failed   int `json:"failed"`
	Unknown  int `json:"unknown"`
	Consumed int `json:"consumed"`
	// Expired: acknowledged records below the final log start (retention).
	Expired int `json:"expired"`
	// LostUnpromised: acknowledged writes missing or moved that no promise
	// covered (acks=1, or a topic not Durable).
	LostUnpromised int `json:"lost_unpromised"`
	// ReadsVanishedUnpromised: records read in a topic that is not Durable
	// that the final log does not hold there (an unclean election).
	ReadsVanishedUnpromised int `json:"reads_vanished_unpromised"`
	// Linearizability per partition: Ok, Illegal, Unknown (timed out) or
	// why it was skipped.
	Linearizable map[string]string `json:"linearizable,omitempty"`
}

// Report is the checker's verdict.
type Report struct {
	Violations []Violation `json:"violations"`
	Stats      Stats       `json:"stats"`
}

// OK reports whether no promise was broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Count returns how many violations of kind k were found.
func (r Report) Count(k Kind) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == k {
			n++
		}
	}
	return n
}

func (r Report) String() string {
	var b strings.Builder
	s := r.Stats
	fmt.Fprintf(&b, "%d produces (%d acked, %d of them acks=all; %d failed, %d unknown), %d reads; %d acked below log start (retention), %d acked writes and %d reads lost where nothing was promised",
		s.Produces, s.Acked, s.AckedAll, s.Failed, s.Unknown, s.Consumed, s.Expired, s.LostUnpromised, s.ReadsVanishedUnpromised)
	if len(s.Linearizable) > 0 {
		b.WriteString("; linearizable:")
		for _, k := range slices.Sorted(maps.Keys(s.Linearizable)) {
			fmt.Fprintf(&b, " %s=%s", k, s.Linearizable[k])
		}
	}
	if r.OK() {
		b.WriteString("\nno violation")
		return b.String()
	}
	fmt.Fprintf(&b, "\n%d violations:", len(r.Violations))
	const shown = 20
	for i, v := range r.Violations {
		if i == shown {
			fmt.Fprintf(&b, "\n  ... %d more", len(r.Violations)-shown)
			break
		}
		fmt.Fprintf(&b, "\n  %s", v)
	}
	return b.String()
}

// checker carries one Check run.
type checker struct {
	h      History
	final  Final
	opts   Options
	events []Event // sorted by time
	rep    Report
	// producedBy maps a value to its produce attempt.
	producedBy map[string]*Produce
	parts      map[TP]PartitionState
	logs       map[TP]map[int64]string // authoritative log per partition
	logStart   map[TP]int64
}

// Check checks a history and the final state against the promises; see the
// Kind constants for what each violation means.
func Check(h History, final Final, opts Options) Report {
	if opts.EventWindow == 0 {
		opts.EventWindow = 5 * time.Second
	}
	if opts.LinearizableOps == 0 {
		opts.LinearizableOps = 3000
	}
	if opts.LinearizableTimeout == 0 {
		opts.LinearizableTimeout = 5 * time.Second
	}
	c := &checker{h: h, final: final, opts: opts, producedBy: map[string]*Produce{},
		parts: map[TP]PartitionState{}, logs: map[TP]map[int64]string{}, logStart: map[TP]int64{}}
	c.events = slices.Clone(h.Events)
	slices.SortStableFunc(c.events, func(a, b Event) int { return a.Time.Compare(b.Time) })
	for i := range c.h.Produces {
		p := &c.h.Produces[i]
		if first, ok := c.producedBy[p.Value]; ok {
			c.add(Violation{Kind: ReusedValue, TP: p.TP, Offset: -1, At: p.Start,
				Message: fmt.Sprintf("%q written by two attempts: the workload must write each value once", p.Value),
				Records: []string{first.String(), p.String()}})
			continue
		}
		c.producedBy[p.Value] = p
	}
	for _, ps := range final.Partitions {
		c.parts[ps.TP] = ps
		if a, ok := ps.authority(); ok {
			log := make(map[int64]string, len(a.Records))
			for _, r := range a.Records {
				log[r.Offset] = r.Value
			}
			c.logs[ps.TP] = log
			if opts.Retention[ps.TP.Topic] {
				c.logStart[ps.TP] = a.LogStart
			}
		}
	}
	c.stats()
	c.checkAcked()
	c.checkReplicas()
	c.checkReads()
	c.checkLiveness()
	c.checkDuplicatesAndPhantoms()
	c.checkLinearizable()
	c.checkRealTimeOrder()
	return c.rep
}

func (c *checker) stats() {
	s := &c.rep.Stats
	s.Produces = len(c.h.Produces)
	s.Consumed = len(c.h.Consumes)
	for _, p := range c.h.Produces {
		switch p.Outcome {
		case Acked:
			s.Acked++
			if p.Acks == AcksAll {
				s.AckedAll++
			}
		case Failed:
			s.Failed++
		default:
			s.Unknown++
		}
	}
}

// promised reports whether an acknowledged write must survive.
func (c *checker) promised(p *Produce) bool {
	if !c.opts.Durable[p.TP.Topic] {
		return false
	}
	return p.Acks == AcksAll || (p.Acks == AcksLeader && c.opts.AcksOneDurable)
}

func (c *checker) add(v Violation) {
	if v.At.IsZero() {
		v.At = c.final.FaultsStopped
	}
	v.Events = c.around(v.At)
	c.rep.Violations = append(c.rep.Violations, v)
}

// around lists the events within the window around t: at most 16, notes
// dropped before faults and heals, then the farthest first.
func (c *checker) around(t time.Time) []Event {
	var out []Event
	notes := 0
	for _, e := range c.events {
		if d := e.Time.Sub(t); d >= -c.opts.EventWindow && d <= c.opts.EventWindow {
			out = append(out, e)
			if e.Kind == Note {
				notes++
			}
		}
	}
	for drop := len(out) - 16; drop > 0 && notes > 0; drop-- {
		far := -1
		for i, e := range out {
			if e.Kind == Note && (far < 0 || absDur(e.Time.Sub(t)) > absDur(out[far].Time.Sub(t))) {
				far = i
			}
		}
		out = slices.Delete(out, far, far+1)
		notes--
	}
	for len(out) > 16 {
		if t.Sub(out[0].Time) > out[len(out)-1].Time.Sub(t) {
			out = out[1:]
		} else {
			out = out[:len(out)-1]
		}
	}
	return out
}

// whereIs finds a value in a partition's final log.
func (c *checker) whereIs(tp TP, value string) []int64 {
	var at []int64
	for off, v := range c.logs[tp] {
		if v == value {
			at = append(at, off)
		}
	}
	slices.Sort(at)
	return at
}

// checkAcked is check 1.
func (c *checker) checkAcked() {
	noLog := map[TP]bool{}
	for i := range c.h.Produces {
		p := &c.h.Produces[i]
		if p.Outcome != Acked {
			continue
		}
		log, ok := c.logs[p.TP]
		if !ok {
			if c.promised(p) && !noLog[p.TP] {
				noLog[p.TP] = true
				c.add(Violation{Kind: NoFinalLog, TP: p.TP, Offset: -1,
					Message: "no replica was readable at the end, so its acknowledged writes cannot be checked"})
			}
			continue
		}
		if p.Offset < 0 {
			// Acknowledged without an offset (a DUPLICATE_SEQUENCE_NUMBER
			// answer, which the client turns into a success): it must be in
			// the log somewhere.
			if len(c.whereIs(p.TP, p.Value)) > 0 {
				continue
			}
			if c.logStart[p.TP] > 0 {
				c.rep.Stats.Expired++ // it may have been below the log start
				continue
			}
		} else if p.Offset < c.logStart[p.TP] {
			c.rep.Stats.Expired++
			continue
		}
		got, present := log[p.Offset]
		if present && got == p.Value {
			continue
		}
		if !c.promised(p) {
			c.rep.Stats.LostUnpromised++
			continue
		}
		at := c.whereIs(p.TP, p.Value)
		recs := []string{p.String()}
		if present {
			recs = append(recs, fmt.Sprintf("final log at offset %d: %q", p.Offset, got))
			if q := c.producedBy[got]; q != nil {
				recs = append(recs, "which was "+q.String())
			}
		} else {
			recs = append(recs, fmt.Sprintf("final log ends before offset %d (log start %d, %d records)", p.Offset, c.logStart[p.TP], len(log)))
		}
		if len(at) > 0 {
			c.add(Violation{Kind: MovedWrite, TP: p.TP, Offset: p.Offset, At: p.End, Records: recs,
				Message: fmt.Sprintf("%q acknowledged at offset %d is at offset %v of the final log", p.Value, p.Offset, at)})
			continue
		}
		c.add(Violation{Kind: LostWrite, TP: p.TP, Offset: p.Offset, At: p.End, Records: recs,
			Message: fmt.Sprintf("%q acknowledged at offset %d (acks=%d) is not in the final log", p.Value, p.Offset, p.Acks)})
	}
}

// checkReplicas is check 2: readable replicas agree on every offset they
// both hold below their HWs, each replica's HW reached its LEO (unless the
// ISR is below min.insync.replicas, where the HW may not move), and no
// replica holds fewer committed records than another's HW.
func (c *checker) checkReplicas() {
	for _, ps := range c.final.Partitions {
		var rs []ReplicaState
		for _, r := range ps.Replicas {
			if r.Readable {
				rs = append(rs, r)
			}
		}
		for _, r := range rs {
			// Under min.insync.replicas the HW may stay below the LEO; above
			// it, never.
			if r.HW > r.LEO || (r.HW < r.LEO && int(ps.MinInsyncReplicas) <= len(ps.ISR)) {
				c.add(Violation{Kind: HWBelowLEO, TP: ps.TP, Offset: r.HW,
					Message: fmt.Sprintf("replica %d has HW %d but LEO %d once quiet (leader %d, ISR %v)", r.Broker, r.HW, r.LEO, ps.Leader, ps.ISR)})
			}
		}
		for i := 0; i < len(rs); i++ {
			for j := i + 1; j < len(rs); j++ {
				if v, ok := diverge(ps, rs[i], rs[j], c.opts.Retention[ps.TP.Topic]); ok {
					c.add(v)
				}
			}
		}
	}
}

// diverge compares two replicas up to the higher HW: below both log starts
// nothing is compared; an offset one holds below its HW and the other
// lacks or holds differently is a divergence.
func diverge(ps PartitionState, a, b ReplicaState, retention bool) (Violation, bool) {
	am, bm := recordMap(a), recordMap(b)
	from := max(a.LogStart, b.LogStart)
	if !retention {
		from = min(a.LogStart, b.LogStart) // nothing may have left either log
	}
	to := max(a.HW, b.HW)
	for off := from; off < to; off++ {
		av, aok := am[off]
		bv, bok := bm[off]
		if aok == bok && av == bv {
			continue
		}
		return Violation{Kind: Divergence, TP: ps.TP, Offset: off,
			Message: fmt.Sprintf("replicas %d and %d differ at offset %d (leader %d, ISR %v)", a.Broker, b.Broker, off, ps.Leader, ps.ISR),
			Records: []string{describe(a, off, av, aok), describe(b, off, bv, bok)}}, true
	}
	return Violation{}, false
}

func describe(r ReplicaState, off int64, v string, ok bool) string {
	if !ok {
		return fmt.Sprintf("replica %d (log start %d, HW %d, LEO %d) has no record at %d", r.Broker, r.LogStart, r.HW, r.LEO, off)
	}
	return fmt.Sprintf("replica %d (log start %d, HW %d, LEO %d) has %q at %d", r.Broker, r.LogStart, r.HW, r.LEO, v, off)
}

func recordMap(r ReplicaState) map[int64]string {
	m := make(map[int64]string, len(r.Records))
	for _, rec := range r.Records {
		m[rec.Offset] = rec.Value
	}
	return m
}

// checkReads is check 3. Offsets must rise within a session in every
// topic; a record read must still be there only in Durable topics (an
// unclean election may take back what a consumer read below the HW).
func (c *checker) checkReads() {
	type session struct {
		consumer string
		id       int64
		tp       TP
	}
	last := map[session]Consume{}
	for _, r := range c.h.Consumes {
		k := session{r.Consumer, r.Session, r.TP}
		if prev, ok := last[k]; ok && r.Offset <= prev.Offset {
			c.add(Violation{Kind: ReadBackwards, TP: r.TP, Offset: r.Offset, At: r.Time,
				Message: fmt.Sprintf("%s read offset %d after offset %d in the same session", r.Consumer, r.Offset, prev.Offset),
				Records: []string{prev.String(), r.String()}})
		}
		last[k] = r
		log, ok := c.logs[r.TP]
		if !ok || r.Offset < c.logStart[r.TP] {
			continue
		}
		if got, present := log[r.Offset]; (!present || got != r.Value) && !c.opts.Durable[r.TP.Topic] {
			c.rep.Stats.ReadsVanishedUnpromised++
		} else if !present || got != r.Value {
			recs := []string{r.String()}
			if present {
				recs = append(recs, fmt.Sprintf("final log at offset %d: %q", r.Offset, got))
			} else {
				recs = append(recs, fmt.Sprintf("final log has no record at offset %d", r.Offset))
			}
			if p := c.producedBy[r.Value]; p != nil {
				recs = append(recs, "it was "+p.String())
			}
			c.add(Violation{Kind: VanishedRead, TP: r.TP, Offset: r.Offset, At: r.Time, Records: recs,
				Message: fmt.Sprintf("%q read at offset %d is not there in the final log", r.Value, r.Offset)})
		}
	}
}

// checkLiveness is check 4.
func (c *checker) checkLiveness() {
	if c.opts.LivenessBound <= 0 {
		return
	}
	for _, ps := range c.final.Partitions {
		live, why := ps.Live()
		switch {
		case ps.LiveAt.IsZero():
			if live {
				why = "whole only when the final state was read"
			}
			c.add(Violation{Kind: NotLive, TP: ps.TP, Offset: -1,
				Message: fmt.Sprintf("never observed whole after the faults stopped at %s (bound %s); at the end: %s", clock(c.final.FaultsStopped), c.opts.LivenessBound, why)})
		case ps.LiveAt.Sub(c.final.FaultsStopped) > c.opts.LivenessBound:
			c.add(Violation{Kind: NotLive, TP: ps.TP, Offset: -1,
				Message: fmt.Sprintf("whole only %s after the faults stopped (bound %s)", ps.LiveAt.Sub(c.final.FaultsStopped).Round(time.Millisecond), c.opts.LivenessBound)})
		case !live:
			c.add(Violation{Kind: NotLive, TP: ps.TP, Offset: -1,
				Message: fmt.Sprintf("whole at %s but no longer at the end: %s", clock(ps.LiveAt), why)})
		}
	}
}

// checkDuplicatesAndPhantoms is check 5, and flags values in a log that no
// produce attempt wrote.
func (c *checker) checkDuplicatesAndPhantoms() {
	for _, ps := range c.final.Partitions {
		log, ok := c.logs[ps.TP]
		if !ok {
			continue
		}
		at := map[string][]int64{}
		for off, v := range log {
			at[v] = append(at[v], off)
		}
		for _, v := range slices.Sorted(maps.Keys(at)) {
			offs := at[v]
			slices.Sort(offs)
			p := c.producedBy[v]
			switch {
			case p == nil:
				c.add(Violation{Kind: PhantomRecord, TP: ps.TP, Offset: offs[0],
					Message: fmt.Sprintf("%q at offsets %v of the final log was never produced", v, offs)})
			case p.TP != ps.TP:
				c.add(Violation{Kind: PhantomRecord, TP: ps.TP, Offset: offs[0], At: p.Start, Records: []string{p.String()},
					Message: fmt.Sprintf("%q at offsets %v was produced to %s", v, offs, p.TP)})
			case len(offs) > 1 && p.Idempotent:
				c.add(Violation{Kind: Duplicate, TP: ps.TP, Offset: offs[1], At: p.End, Records: []string{p.String()},
					Message: fmt.Sprintf("idempotent %s's %q is in the final log %d times, at offsets %v", p.Producer, v, len(offs), offs)})
			}
		}
	}
	for _, r := range c.h.Consumes {
		if p := c.producedBy[r.Value]; p == nil || p.TP != r.TP {
			c.add(Violation{Kind: PhantomRecord, TP: r.TP, Offset: r.Offset, At: r.Time, Records: []string{r.String()},
				Message: fmt.Sprintf("%q was read but never produced to %s", r.Value, r.TP)})
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

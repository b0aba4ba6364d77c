package history

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check models a partition as an append-only log: an
// append returns the offset it got, a read at an offset returns the value
// there, and the final state is one last read of the whole log. Porcupine
// searches for an order of these operations, consistent with real time,
// that the model explains. What it adds to the direct checks: an
// acknowledgement's offset must respect real time (a write acknowledged
// before another was even sent cannot get the higher offset), a read
// cannot return a value before its write was sent, and reads of records
// that retention later deleted must still agree with each other.
//
// Only Durable topics are checked (elsewhere acknowledged writes may
// legitimately vanish). Failed and unknown attempts are pending forever
// (their append may have happened at any time after they were sent); those
// whose value nobody ever observed are left out, as an append nobody saw
// is indistinguishable from none. acks=1 writes that are not promised are
// treated as unknown too.

type logOp struct {
	append bool
	value  string
	offset int64 // the acknowledged offset, -1 unknown; the read's offset
	// final read: the whole log from start to leo.
	final bool
	start int64
	log   map[int64]string
	leo   int64
}

// logState is an immutable log: a chain of appends sharing prefixes.
type logState struct {
	prev  *logState
	value string
	n     int64 // records including this one
	hash  uint64
}

func (s *logState) length() int64 {
	if s == nil {
		return 0
	}
	return s.n
}

func (s *logState) at(off int64) (string, bool) {
	if off < 0 || off >= s.length() {
		return "", false
	}
	for s.n-1 > off {
		s = s.prev
	}
	return s.value, true
}

func (s *logState) push(v string) *logState {
	h := s.hashOf()*1099511628211 ^ fnv(v)
	return &logState{prev: s, value: v, n: s.length() + 1, hash: h}
}

func (s *logState) hashOf() uint64 {
	if s == nil {
		return 14695981039346656037
	}
	return s.hash
}

func fnv(v string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	return h
}

var logModel = porcupine.Model{
	Init: func() any { return (*logState)(nil) },
	Step: func(state, input, _ any) (bool, any) {
		s, op := state.(*logState), input.(logOp)
		switch {
		case op.append:
			if op.offset >= 0 && op.offset != s.length() {
				return false, s
			}
			return true, s.push(op.value)
		case op.final:
			if s.length() != op.leo {
				return false, s
			}
			for off := op.start; off < op.leo; off++ {
				if v, _ := s.at(off); v != op.log[off] {
					return false, s
				}
			}
			return true, s
		default:
			v, ok := s.at(op.offset)
			return ok && v == op.value, s
		}
	},
	Equal: func(a, b any) bool {
		x, y := a.(*logState), b.(*logState)
		for x != y {
			if x.length() != y.length() || x.hashOf() != y.hashOf() || x.value != y.value {
				return false
			}
			x, y = x.prev, y.prev
		}
		return true
	},
	Hash: func(s any) uint64 { return s.(*logState).hashOf() },
	DescribeOperation: func(input, _ any) string {
		op := input.(logOp)
		switch {
		case op.append && op.offset >= 0:
			return fmt.Sprintf("append %q -> %d", op.value, op.offset)
		case op.append:
			return fmt.Sprintf("append %q -> ?", op.value)
		case op.final:
			return fmt.Sprintf("final log [%d, %d)", op.start, op.leo)
		}
		return fmt.Sprintf("read %d -> %q", op.offset, op.value)
	},
}

func (c *checker) checkLinearizable() {
	if c.opts.LinearizableOps < 0 {
		return
	}
	observed := map[string]bool{}
	for _, r := range c.h.Consumes {
		observed[r.Value] = true
	}
	for _, log := range c.logs {
		for _, v := range log {
			observed[v] = true
		}
	}
	var last int64
	ops := map[TP][]porcupine.Operation{}
	for i := range c.h.Produces {
		p := &c.h.Produces[i]
		if !c.opts.Durable[p.TP.Topic] {
			continue
		}
		op := logOp{append: true, value: p.Value, offset: -1}
		ret := int64(math.MaxInt64)
		if p.Outcome == Acked && c.promised(p) {
			op.offset, ret = p.Offset, p.End.UnixNano()
		} else if !observed[p.Value] {
			continue
		}
		last = max(last, p.Start.UnixNano(), p.End.UnixNano())
		ops[p.TP] = append(ops[p.TP], porcupine.Operation{ClientId: int(p.ID), Input: op, Call: p.Start.UnixNano(), Return: ret})
	}
	for _, r := range c.h.Consumes {
		if !c.opts.Durable[r.TP.Topic] {
			continue
		}
		t := r.Time.UnixNano()
		last = max(last, t)
		ops[r.TP] = append(ops[r.TP], porcupine.Operation{Input: logOp{value: r.Value, offset: r.Offset}, Call: t, Return: t})
	}
	if c.rep.Stats.Linearizable == nil {
		c.rep.Stats.Linearizable = map[string]string{}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(ops), compareTP) {
		list := ops[tp]
		if log, ok := c.logs[tp]; ok {
			ps := c.parts[tp]
			a, _ := ps.authority()
			t := max(last, c.final.FaultsStopped.UnixNano()) + 1
			list = append(list, porcupine.Operation{Input: logOp{final: true, start: a.LogStart, leo: a.LEO, log: log}, Call: t, Return: t})
		}
		if len(list) > c.opts.LinearizableOps {
			c.rep.Stats.Linearizable[tp.String()] = fmt.Sprintf("skipped (%d operations > %d)", len(list), c.opts.LinearizableOps)
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(logModel, list, c.opts.LinearizableTimeout)
		c.rep.Stats.Linearizable[tp.String()] = string(res)
		if res != porcupine.Illegal {
			continue
		}
		c.add(c.linearViolation(tp, list, info))
	}
}

// linearViolation names the operations the longest linearizable prefix
// could not take in: the earliest of them is where the log stopped making
// sense.
func (c *checker) linearViolation(tp TP, list []porcupine.Operation, info porcupine.LinearizationInfo) Violation {
	placed := map[int]bool{}
	for _, part := range info.PartialLinearizations() {
		var longest []int
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
		for _, i := range longest {
			placed[i] = true
		}
	}
	v := Violation{Kind: NotLinearizable, TP: tp, Offset: -1,
		Message: fmt.Sprintf("no order of its %d operations consistent with real time fits an append-only log; %d could be placed", len(list), len(placed))}
	var stuck []porcupine.Operation
	for i, op := range list {
		if !placed[i] {
			stuck = append(stuck, op)
		}
	}
	slices.SortFunc(stuck, func(a, b porcupine.Operation) int { return cmpInt(a.Call, b.Call) })
	for i, op := range stuck {
		if i == 5 {
			v.Records = append(v.Records, fmt.Sprintf("... %d more", len(stuck)-5))
			break
		}
		v.Records = append(v.Records, fmt.Sprintf("unplaceable: %s sent %s", logModel.DescribeOperation(op.Input, nil), clock(time.Unix(0, op.Call))))
		if i == 0 {
			v.At = time.Unix(0, op.Call)
			if lo := op.Input.(logOp); !lo.final {
				v.Offset = lo.offset
			}
		}
	}
	return v
}

func compareTP(a, b TP) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return cmpInt(int64(a.Partition), int64(b.Partition))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkRealTimeOrder checks directly, with no bound, two of the things only
// porcupine sees, on every partition porcupine did not decide (skipped over
// LinearizableOps, or timed out): a promised write acknowledged before
// another was sent has the lower offset, and no read returns a value before
// its write was sent.
func (c *checker) checkRealTimeOrder() {
	undecided := func(tp TP) bool {
		res, ok := c.rep.Stats.Linearizable[tp.String()]
		return !ok || (res != string(porcupine.Ok) && res != string(porcupine.Illegal))
	}
	if c.opts.LinearizableOps < 0 {
		undecided = func(TP) bool { return true }
	}
	acked := map[TP][]*Produce{}
	for i := range c.h.Produces {
		p := &c.h.Produces[i]
		if p.Outcome == Acked && p.Offset >= 0 && c.promised(p) && undecided(p.TP) {
			acked[p.TP] = append(acked[p.TP], p)
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(acked), compareTP) {
		byEnd := slices.Clone(acked[tp])
		slices.SortFunc(byEnd, func(a, b *Produce) int { return a.End.Compare(b.End) })
		byStart := slices.Clone(acked[tp])
		slices.SortFunc(byStart, func(a, b *Produce) int { return a.Start.Compare(b.Start) })
		// Sweep: before each write is sent, the highest offset already
		// acknowledged must be below its own.
		var top *Produce
		i := 0
		for _, b := range byStart {
			for ; i < len(byEnd) && byEnd[i].End.Before(b.Start); i++ {
				if top == nil || byEnd[i].Offset > top.Offset {
					top = byEnd[i]
				}
			}
			if top != nil && top.Offset >= b.Offset {
				c.add(Violation{Kind: NotLinearizable, TP: tp, Offset: b.Offset, At: b.Start,
					Records: []string{top.String(), b.String()},
					Message: fmt.Sprintf("%q sent after %q was acknowledged at offset %d, yet acknowledged at offset %d", b.Value, top.Value, top.Offset, b.Offset)})
				break
			}
		}
	}
	for _, r := range c.h.Consumes {
		if !c.opts.Durable[r.TP.Topic] || !undecided(r.TP) {
			continue
		}
		if p := c.producedBy[r.Value]; p != nil && p.TP == r.TP && r.Time.Before(p.Start) {
			c.add(Violation{Kind: NotLinearizable, TP: r.TP, Offset: r.Offset, At: r.Time, Records: []string{r.String(), p.String()},
				Message: fmt.Sprintf("%q read at offset %d before it was sent", r.Value, r.Offset)})
		}
	}
}

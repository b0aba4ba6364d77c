package partition

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"tidemark.io/services/platform/kerr"
)

// harness drives one Partition from script commands, playing the broker:
// it keeps the clock, a leader-epoch cache and the membership view.
type harness struct {
	p       *Partition
	nowMs   int64
	brokers *fakeBrokers
	epochs  *testEpochs
}

func (h *harness) now() time.Time { return time.UnixMilli(h.nowMs) }

// run executes one command line and returns its output lines.
func (h *harness) run(line string) ([]string, error) {
	fields := strings.Fields(line)
	a, err := parseArgs(fields[1:])
	if err != nil {
		return nil, err
	}
	verb := fields[0]
	if verb != "new" && h.p == nil {
		return nil, fmt.Errorf("%s before new", verb)
	}
	if a.has("now") {
		h.nowMs = a.int64("now", 0)
	}
	cmd, ok := commands[verb]
	if !ok {
		return nil, fmt.Errorf("unknown command %q", verb)
	}
	out := cmd(h, a)
	if a.err != nil {
		return nil, a.err
	}
	if unused := a.unused(); len(unused) > 0 {
		return nil, fmt.Errorf("unknown arguments %v", unused)
	}
	for i, l := range out {
		if strings.TrimSpace(l) == "" {
			out[i] = "(empty)"
		}
	}
	return out, nil
}

var commands map[string]func(*harness, *args) []string

func init() {
	commands = map[string]func(*harness, *args) []string{
		"new":            cmdNew,
		"status":         cmdStatus,
		"tick":           func(h *harness, _ *args) []string { return []string{fmt.Sprintf("now %d", h.nowMs)} },
		"broker":         cmdBroker,
		"min-isr":        cmdMinISR,
		"make-leader":    cmdMakeLeader,
		"make-follower":  cmdMakeFollower,
		"append":         cmdAppend,
		"log-start":      cmdLogStart,
		"fetch":          cmdFetch,
		"shrink":         cmdShrink,
		"alter-result":   cmdAlterResult,
		"produce-check":  cmdProduceCheck,
		"produce-done":   cmdProduceDone,
		"validate-read":  cmdValidateRead,
		"preferred-read": cmdPreferredRead,
		"epochs":         cmdEpochs,
		"fetch-response": cmdFetchResponse,
		"start-fetching": cmdStartFetching,
		"diverging":      cmdDiverging,
		"truncated":      cmdTruncated,
	}
}

func cmdNew(h *harness, a *args) []string {
	mode, err := ParseTruncationMode(a.str("mode", "leader-epoch"))
	if err != nil {
		a.fail(err)
		return nil
	}
	h.brokers = newFakeBrokers()
	cfg := Config{
		LocalID:           a.int32("id", 1),
		ReplicaLagTimeMax: time.Duration(a.int64("lag", 30000)) * time.Millisecond,
		MinInsyncReplicas: int(a.int64("min-isr", 1)),
		Truncation:        mode,
		Brokers:           h.brokers,
	}
	h.p = New(cfg, LogState{
		LogStartOffset: a.int64("log-start", 0),
		LogEndOffset:   a.int64("leo", 0),
		HighWatermark:  a.int64("hw", 0),
	})
	h.epochs = &testEpochs{leo: h.p.LogEndOffset}
	if err := h.epochs.set(a.str("epochs", "")); err != nil {
		a.fail(err)
	}
	return []string{fmt.Sprintf("broker %d: hw %d, leo %d, log start %d, min isr %d, lag %dms, truncation %s, epochs %s",
		cfg.LocalID, h.p.HighWatermark(), h.p.LogEndOffset(), h.p.LogStartOffset(), h.p.cfg.MinInsyncReplicas,
		h.p.cfg.ReplicaLagTimeMax.Milliseconds(), mode, h.epochs)}
}

func cmdStatus(h *harness, _ *args) []string {
	s := h.p.Snapshot(h.now())
	out := []string{fmt.Sprintf("%s, leader %d, leader epoch %d, partition epoch %d, epoch start %d",
		s.Role, s.Leader, s.LeaderEpoch, s.PartitionEpoch, s.LeaderEpochStartOffset)}
	out = append(out, fmt.Sprintf("replicas %s, isr %s, maximal isr %s",
		FormatIDs(s.Replicas), FormatIDs(s.ISR), FormatIDs(s.MaximalISR)))
	switch {
	case s.Pending == nil:
		out = append(out, "pending: none")
	case s.AwaitingMetadata:
		out = append(out, "pending: "+s.Pending.LogLine()+" (awaiting metadata)")
	default:
		out = append(out, "pending: "+s.Pending.LogLine())
	}
	out = append(out, fmt.Sprintf("hw %d, leo %d, log start %d, min isr %d (effective %d), under min isr %t",
		s.HighWatermark, s.LogEndOffset, s.LogStartOffset, s.MinInsyncReplicas, s.EffectiveMinISR, s.UnderMinISR))
	for _, f := range s.Followers {
		isr := "out of isr"
		if f.InISR {
			isr = "in isr"
		}
		sync := "out of sync"
		if f.CaughtUp {
			sync = "caught up"
		}
		out = append(out, fmt.Sprintf("follower %d: %s, leo %d, lag %d, last caught up %d (age %dms), last fetch %d, %s",
			f.ID, isr, f.LogEndOffset, f.OffsetLag, f.LastCaughtUpMs, f.CaughtUpAgeMs, f.LastFetchMs, sync))
	}
	return out
}

func cmdBroker(h *harness, a *args) []string {
	id := a.int32("id", 0)
	if a.has("eligible") {
		h.brokers.ineligible[id] = a.str("eligible", "true") == "false"
	}
	if a.has("epoch") {
		h.brokers.epochs[id] = a.int64("epoch", 0)
	}
	e, ok := h.brokers.BrokerEpoch(id)
	epoch := "untracked"
	if ok {
		epoch = strconv.FormatInt(e, 10)
	}
	return []string{fmt.Sprintf("broker %d: eligible %t, epoch %s", id, h.brokers.IsrEligible(id), epoch)}
}

func cmdMinISR(h *harness, a *args) []string {
	u := h.p.SetMinInsyncReplicas(int(a.int64("n", 1)), h.now())
	return []string{fmt.Sprintf("min isr %d (effective %d)", h.p.cfg.MinInsyncReplicas, h.p.EffectiveMinISR()), hwLine(u)}
}

func (h *harness) stateArg(a *args, leader int32) LeaderAndISR {
	epoch := a.int32("epoch", 0)
	return LeaderAndISR{
		Leader:         leader,
		LeaderEpoch:    epoch,
		PartitionEpoch: a.int32("pepoch", epoch),
		Replicas:       a.ids("replicas"),
		ISR:            a.ids("isr"),
		Adding:         a.ids("adding"),
	}
}

func cmdMakeLeader(h *harness, a *args) []string {
	s := h.stateArg(a, h.p.cfg.LocalID)
	rc, err := h.p.MakeLeader(s, a.int64("leo", h.p.LogEndOffset()), h.now())
	if err != nil {
		return errLines(err)
	}
	if rc.Ignored {
		return []string{"ignored: " + rc.Reason}
	}
	out := []string{fmt.Sprintf("leader: leader epoch %d, partition epoch %d, replicas %s, isr %s",
		h.p.LeaderEpoch(), h.p.PartitionEpoch(), FormatIDs(h.p.Replicas()), FormatIDs(h.p.ISR()))}
	if rc.NewLeaderEpoch {
		// The broker's duty: record the epoch before any append (F12).
		h.epochs.assign(h.p.LeaderEpoch(), rc.EpochStartOffset)
		out = append(out, fmt.Sprintf("new leader epoch %d starts at offset %d; epoch cache %s",
			h.p.LeaderEpoch(), rc.EpochStartOffset, h.epochs))
	} else {
		out = append(out, "same leader epoch: assignment and isr refreshed")
	}
	return append(out, hwLine(rc.HW))
}

func cmdMakeFollower(h *harness, a *args) []string {
	s := h.stateArg(a, a.int32("leader", 0))
	rc, err := h.p.MakeFollower(s, a.int64("leo", h.p.LogEndOffset()), h.now())
	if err != nil {
		return errLines(err)
	}
	if rc.Ignored {
		return []string{"ignored: " + rc.Reason}
	}
	out := []string{fmt.Sprintf("follower of %d: leader epoch %d, partition epoch %d, replicas %s",
		h.p.Leader(), h.p.LeaderEpoch(), h.p.PartitionEpoch(), FormatIDs(h.p.Replicas()))}
	if rc.NewLeaderEpoch {
		out = append(out, "new leader epoch: restart fetching")
	}
	return append(out, hwLine(rc.HW))
}

func cmdAppend(h *harness, a *args) []string {
	leo := a.int64("leo", h.p.LogEndOffset())
	if err := h.p.BeforeAppend(int16(a.int64("acks", 1))); err != nil {
		return errLines(err)
	}
	u := h.p.OnLocalAppend(leo, h.now())
	return []string{fmt.Sprintf("leo %d", leo), hwLine(u)}
}

func cmdLogStart(h *harness, a *args) []string {
	h.p.SetLogStartOffset(a.int64("offset", 0))
	return []string{fmt.Sprintf("log start %d, hw %d", h.p.LogStartOffset(), h.p.HighWatermark())}
}

func cmdFetch(h *harness, a *args) []string {
	id := a.int32("replica", 0)
	offset := a.int64("offset", 0)
	if err := h.p.ValidateFetch(id, a.int32("epoch", h.p.LeaderEpoch())); err != nil {
		return errLines(err)
	}
	if a.has("last-epoch") {
		d, diverging, err := h.p.CheckDivergence(a.int32("last-epoch", NoEpoch), offset, h.epochs)
		if err != nil {
			return errLines(err)
		}
		if diverging {
			return []string{fmt.Sprintf("diverging: %s (no records, follower state untouched)", d)}
		}
	}
	out, err := h.p.UpdateFollowerFetch(FollowerFetch{
		ReplicaID:      id,
		BrokerEpoch:    a.int64("broker-epoch", NoEpoch),
		FetchOffset:    offset,
		LogStartOffset: a.int64("log-start", 0),
		LeaderLEO:      a.int64("leader-leo", h.p.LogEndOffset()),
	}, h.now())
	if err != nil {
		return errLines(err)
	}
	lines := []string{h.followerLine(id)}
	if out.Proposal != nil {
		lines = append(lines, proposalLine(*out.Proposal))
	}
	return append(lines, hwLine(out.HW))
}

func (h *harness) followerLine(id int32) string {
	f := h.p.followers[id]
	return fmt.Sprintf("follower %d: leo %d, last caught up %d, last fetch %d (leader leo then %d)",
		id, f.leo, f.lastCaughtUpMs, f.lastFetchMs, f.lastFetchLeaderLEO)
}

func cmdShrink(h *harness, _ *args) []string {
	res := h.p.MaybeShrinkISR(h.now())
	switch {
	case res.Blocked:
		pr, _, _ := h.p.Pending()
		return []string{"blocked: AlterPartition in flight: " + pr.LogLine()}
	case res.Proposal == nil:
		return []string{"no out-of-sync followers"}
	}
	var out []string
	for _, id := range res.OutOfSync {
		f := h.p.followers[id]
		out = append(out, fmt.Sprintf("out of sync: %d (leo %d, last caught up %d)", id, f.leo, f.lastCaughtUpMs))
	}
	return append(out, proposalLine(*res.Proposal))
}

func cmdAlterResult(h *harness, a *args) []string {
	pr, _, ok := h.p.Pending()
	req := pr.Request
	if a.flag("outdated") {
		req.Seq--
	}
	res := AlterPartitionResult{
		Error:          a.code("error"),
		LeaderEpoch:    a.int32("epoch", h.p.LeaderEpoch()),
		PartitionEpoch: a.int32("pepoch", h.p.PartitionEpoch()+1),
		ISR:            pr.To,
	}
	if a.has("isr") {
		res.ISR = a.ids("isr")
	}
	if !ok && !a.has("isr") {
		res.ISR = h.p.ISR()
	}
	o := h.p.HandleAlterPartition(req, res, h.now())
	out := []string{fmt.Sprintf("%s: %s", o.Action, o.Reason)}
	if o.Resend != nil {
		out = append(out, fmt.Sprintf("resend: isr %s at partition epoch %d", FormatIDs(o.Resend.ISR()), o.Resend.PartitionEpoch))
	}
	return append(out, hwLine(o.HW))
}

func cmdProduceCheck(h *harness, a *args) []string {
	if err := h.p.BeforeAppend(int16(a.int64("acks", 1))); err != nil {
		return errLines(err)
	}
	return []string{"ok"}
}

func cmdProduceDone(h *harness, a *args) []string {
	off := a.int64("offset", 0)
	done, err := h.p.ProduceDone(off)
	switch {
	case err != nil:
		return append([]string{"done with error"}, errLines(err)...)
	case done:
		return []string{fmt.Sprintf("done (hw %d >= %d)", h.p.HighWatermark(), off)}
	}
	return []string{fmt.Sprintf("waiting (hw %d < %d)", h.p.HighWatermark(), off)}
}

func cmdValidateRead(h *harness, a *args) []string {
	if err := h.p.ValidateRead(a.int32("epoch", NoEpoch), a.flag("leader-only")); err != nil {
		return errLines(err)
	}
	return []string{fmt.Sprintf("ok: readable up to %d", h.p.MaxReadableOffset())}
}

func cmdPreferredRead(h *harness, a *args) []string {
	racks := map[int32]string{}
	for _, part := range strings.Split(a.str("racks", ""), ",") {
		id, rack, _ := strings.Cut(part, ":")
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil {
			a.fail(fmt.Errorf("bad racks entry %q", part))
			return nil
		}
		racks[int32(n)] = rack
	}
	id := h.p.PreferredReadReplica(a.str("rack", ""), a.int64("offset", 0),
		func(id int32) string { return racks[id] }, h.now())
	if id == NoReplica {
		return []string{"preferred read replica: none (read from the leader)"}
	}
	return []string{fmt.Sprintf("preferred read replica: %d", id)}
}

func cmdEpochs(h *harness, a *args) []string {
	if err := h.epochs.set(a.positional()); err != nil {
		a.fail(err)
	}
	return []string{"epoch cache " + h.epochs.String()}
}

func cmdFetchResponse(h *harness, a *args) []string {
	u := h.p.OnFetchResponse(a.int64("hw", 0), a.int64("leo", h.p.LogEndOffset()))
	return []string{fmt.Sprintf("leo %d", h.p.LogEndOffset()), hwLine(u)}
}

func cmdStartFetching(h *harness, _ *args) []string {
	fs := h.p.StartFetching(h.epochs)
	var out []string
	if fs.TruncateTo != UndefinedOffset {
		out = append(out, fmt.Sprintf("%s: truncate to %d (leo %d, hw %d)", fs.Mode, fs.TruncateTo, h.p.LogEndOffset(), h.p.HighWatermark()))
	} else {
		out = append(out, fmt.Sprintf("%s: no truncation", fs.Mode))
	}
	if fs.LastFetchedEpoch == NoEpoch {
		return append(out, fmt.Sprintf("fetch from %d without last fetched epoch", fs.FetchOffset))
	}
	return append(out, fmt.Sprintf("fetch from %d with last fetched epoch %d", fs.FetchOffset, fs.LastFetchedEpoch))
}

func cmdDiverging(h *harness, a *args) []string {
	t := h.p.OnDivergingEpoch(EpochEndOffset{Epoch: a.int32("epoch", 0), EndOffset: a.int64("end", 0)}, h.epochs)
	return []string{t.String()}
}

func cmdTruncated(h *harness, a *args) []string {
	leo := a.int64("leo", 0)
	h.epochs.truncateFromEnd(leo)
	u := h.p.OnTruncated(leo)
	return []string{fmt.Sprintf("leo %d, epoch cache %s", leo, h.epochs), hwLine(u)}
}

func hwLine(u HWUpdate) string {
	s := fmt.Sprintf("hw %d", u.After)
	if u.Changed() {
		s = fmt.Sprintf("hw %d -> %d", u.Before, u.After)
	}
	if u.HeldByMinISR {
		s += " (held: ISR below min.insync.replicas)"
	}
	return s
}

func proposalLine(pr Proposal) string {
	return fmt.Sprintf("propose: %s (leader epoch %d, partition epoch %d)",
		pr.LogLine(), pr.Request.LeaderEpoch, pr.Request.PartitionEpoch)
}

func errLines(err error) []string {
	line := "error: " + err.Error()
	if e := kerr.As(err); e.Leader != nil {
		line += fmt.Sprintf(" [hint: leader %d, leader epoch %d]", e.Leader.ID, e.Leader.LeaderEpoch)
	}
	return []string{line}
}

// args are a command's key=value arguments; bare words are flags or, for
// commands that take one, the positional argument.
type args struct {
	kv   map[string]string
	used map[string]bool
	err  error
}

func parseArgs(fields []string) (*args, error) {
	a := &args{kv: map[string]string{}, used: map[string]bool{}}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			k, v = f, ""
		}
		if _, dup := a.kv[k]; dup {
			return nil, fmt.Errorf("argument %q given twice", k)
		}
		a.kv[k] = v
	}
	return a, nil
}

func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

func (a *args) has(k string) bool { _, ok := a.kv[k]; return ok }

func (a *args) flag(k string) bool { a.used[k] = true; return a.has(k) }

func (a *args) str(k, def string) string {
	a.used[k] = true
	if v, ok := a.kv[k]; ok {
		return v
	}
	return def
}

func (a *args) int64(k string, def int64) int64 {
	v := a.str(k, "")
	switch {
	case !a.has(k):
		return def
	case v == "none":
		return NoEpoch
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.fail(fmt.Errorf("%s=%q is not a number", k, v))
	}
	return n
}

func (a *args) int32(k string, def int32) int32 { return int32(a.int64(k, int64(def))) }

func (a *args) ids(k string) []int32 {
	v := a.str(k, "")
	if v == "" {
		return nil
	}
	var out []int32
	for _, part := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(part, 10, 32)
		if err != nil {
			a.fail(fmt.Errorf("%s=%q is not a list of ids", k, v))
			return nil
		}
		out = append(out, int32(n))
	}
	return out
}

func (a *args) code(k string) kerr.Code {
	name := a.str(k, "NONE")
	for _, c := range kerr.Codes() {
		if c.String() == name {
			return c
		}
	}
	a.fail(fmt.Errorf("unknown error %q", name))
	return kerr.None
}

// positional returns the one bare word, for commands like "epochs 0@0,1@5".
func (a *args) positional() string {
	for k, v := range a.kv {
		if v == "" {
			a.used[k] = true
			return k
		}
	}
	return ""
}

func (a *args) unused() []string {
	var out []string
	for k := range a.kv {
		if !a.used[k] && k != "now" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"tidemark.io/services/clustertest/history"
	"tidemark.io/services/recordbatch"
)

// readReplica reads one replica's partition log from a stopped broker's
// data dir (DESIGN.md section 2): its segments batch by batch, its log start
// from log-start-offset-checkpoint and its HW from
// replication-offset-checkpoint. The broker must be stopped: a running one
// may append, roll or delete segments under the reader.
//
// A batch that does not validate ends the read there (recovery would cut
// the log at the same place), and is reported in the returned notes.
func readReplica(dataDir string, broker int32, tp history.TP) (history.ReplicaState, []string, error) {
	rs := history.ReplicaState{Broker: broker}
	dir := filepath.Join(dataDir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rs, nil, fmt.Errorf("broker %d %s: %w", broker, tp, err)
	}
	var segs []int64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || e.IsDir() {
			continue
		}
		base, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			return rs, nil, fmt.Errorf("broker %d %s: segment %s: name is not a base offset", broker, tp, e.Name())
		}
		segs = append(segs, base)
	}
	slices.Sort(segs)
	var notes []string
	leo := int64(-1)
	for i, base := range segs {
		if leo < 0 {
			leo = base // an empty log (retention took everything) ends at its segment's base
		}
		path := filepath.Join(dir, fmt.Sprintf("%020d.log", base))
		buf, err := os.ReadFile(path)
		if err != nil {
			return rs, nil, err
		}
		if len(buf) > 0 && base != leo {
			notes = append(notes, fmt.Sprintf("broker %d %s: segment %d does not follow the previous one (ends at %d)", broker, tp, base, leo))
		}
		cut := false
		for b, err := range recordbatch.All(buf) {
			if err == nil {
				err = b.ValidateStored() // compacted topics hold thinned batches
			}
			if err != nil {
				notes = append(notes, fmt.Sprintf("broker %d %s: segment %d: %v (read stops there)", broker, tp, base, err))
				cut = true
				break
			}
			for r, err := range b.Records() {
				if err != nil {
					return rs, nil, fmt.Errorf("broker %d %s: batch at %d: %w", broker, tp, b.BaseOffset(), err)
				}
				rs.Records = append(rs.Records, history.Record{Offset: r.Offset, Value: string(r.Value)})
			}
			leo = b.NextOffset()
		}
		if cut && i < len(segs)-1 {
			break
		}
	}
	if leo < 0 {
		leo = 0
	}
	rs.LEO = leo
	start, _, err := checkpointEntry(filepath.Join(dataDir, "log-start-offset-checkpoint"), tp)
	if err != nil {
		return rs, nil, err
	}
	if len(segs) > 0 {
		start = max(start, segs[0])
	}
	rs.LogStart = min(start, leo)
	// Records below the log start are gone for a reader, as for the broker.
	rs.Records = slices.DeleteFunc(rs.Records, func(r history.Record) bool { return r.Offset < rs.LogStart })
	hw, ok, err := checkpointEntry(filepath.Join(dataDir, "replication-offset-checkpoint"), tp)
	if err != nil {
		return rs, nil, err
	}
	if !ok {
		notes = append(notes, fmt.Sprintf("broker %d %s: no HW in replication-offset-checkpoint", broker, tp))
	}
	// Not clamped to the LEO: a checkpoint above the log the graceful stop
	// left is a broken replica, which the checker must see (HW > LEO).
	rs.HW = max(hw, rs.LogStart)
	if hw > leo {
		notes = append(notes, fmt.Sprintf("broker %d %s: HW checkpoint %d above the log's end %d", broker, tp, hw, leo))
	}
	rs.Readable = true
	return rs, notes, nil
}

// checkpointEntry reads a partition's entry of a Kafka-layout checkpoint
// file: "0", the entry count, then "topic partition offset" lines. A
// missing file or entry is (0, false).
func checkpointEntry(path string, tp history.TP) (int64, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		if line <= 2 {
			continue
		}
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			return 0, false, fmt.Errorf("%s line %d: want \"topic partition offset\", got %q", path, line, sc.Text())
		}
		p, err1 := strconv.ParseInt(fields[1], 10, 32)
		off, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false, fmt.Errorf("%s line %d: bad partition or offset in %q", path, line, sc.Text())
		}
		if fields[0] == tp.Topic && int32(p) == tp.Partition {
			return off, true, nil
		}
	}
	return 0, false, sc.Err()
}

// strayLogs lists the brokers outside assigned that still hold a log
// directory for tp.
func strayLogs(dataDir string, tp history.TP, assigned []int32) []string {
	var out []string
	for id := int32(1); id <= 3; id++ {
		if slices.Contains(assigned, id) {
			continue
		}
		dir := filepath.Join(dataDir, fmt.Sprintf("broker-%d", id), fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		if _, err := os.Stat(dir); err == nil {
			out = append(out, fmt.Sprintf("%s: broker %d still holds %s, assigned %v", tp, id, dir, assigned))
		}
	}
	return out
}

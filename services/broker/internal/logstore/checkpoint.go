package logstore

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// Checkpoint files use Kafka's text layout:
//
//	0            version
//	N            number of entries
//	f1 f2 ...    N lines, space separated
//
// They are replaced atomically (temp file, fsync, rename, fsync directory).

const checkpointVersion = 0

// CheckpointError is a checkpoint file that cannot be parsed. Line is
// 1-based; 0 means the file as a whole.
type CheckpointError struct {
	File   string
	Line   int
	Reason string
}

func (e *CheckpointError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("checkpoint %s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("checkpoint %s:%d: %s", e.File, e.Line, e.Reason)
}

// readCheckpoint returns the entry lines of path, each split into exactly
// fields fields. A missing file gives found=false and no error.
func readCheckpoint(fsys vfs.FS, path string, fields int) (rows [][]string, found bool, err error) {
	data, err := vfs.ReadFile(fsys, path)
	if vfs.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, storageErr(err, "reading checkpoint %s", path)
	}
	bad := func(line int, format string, args ...any) error {
		return &CheckpointError{File: path, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	v, ok := next()
	if !ok {
		return nil, true, bad(0, "empty file")
	}
	if strings.TrimSpace(v) != strconv.Itoa(checkpointVersion) {
		return nil, true, bad(line, "unsupported version %q", v)
	}
	c, ok := next()
	if !ok {
		return nil, true, bad(line, "missing entry count")
	}
	count, err := strconv.Atoi(strings.TrimSpace(c))
	if err != nil || count < 0 {
		return nil, true, bad(line, "bad entry count %q", c)
	}
	rows = make([][]string, 0, min(count, 1<<16))
	for range count {
		l, ok := next()
		if !ok {
			return nil, true, bad(line, "expected %d entries, found %d", count, len(rows))
		}
		f := strings.Fields(l)
		if len(f) != fields {
			return nil, true, bad(line, "expected %d fields, got %q", fields, l)
		}
		rows = append(rows, f)
	}
	for {
		l, ok := next()
		if !ok {
			break
		}
		if strings.TrimSpace(l) != "" {
			return nil, true, bad(line, "unexpected line %q after %d entries", l, count)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, true, bad(line, "%v", err)
	}
	return rows, true, nil
}

func writeCheckpoint(fsys vfs.FS, dir, name string, rows []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(rows))
	for _, r := range rows {
		b.WriteString(r)
		b.WriteByte('\n')
	}
	if err := vfs.WriteFileAtomic(fsys, dir, name, []byte(b.String())); err != nil {
		return storageErr(err, "writing checkpoint %s/%s", dir, name)
	}
	return nil
}

func parseInt(path string, line int, what, s string, bits int) (int64, error) {
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return 0, &CheckpointError{File: path, Line: line, Reason: fmt.Sprintf("bad %s %q", what, s)}
	}
	return v, nil
}

// ReadOffsetCheckpoint reads a per-data-dir offsets checkpoint
// ("topic partition offset" lines). A missing file is an empty map.
func ReadOffsetCheckpoint(fsys vfs.FS, dir, name string) (map[TopicPartition]int64, error) {
	path := dir + "/" + name
	rows, _, err := readCheckpoint(fsys, path, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(rows))
	for i, r := range rows {
		line := i + 3
		p, err := parseInt(path, line, "partition", r[1], 32)
		if err != nil {
			return nil, err
		}
		off, err := parseInt(path, line, "offset", r[2], 64)
		if err != nil {
			return nil, err
		}
		tp := TopicPartition{Topic: r[0], Partition: int32(p)}
		if err := tp.Validate(); err != nil || off < 0 {
			return nil, &CheckpointError{File: path, Line: line, Reason: fmt.Sprintf("bad entry %q", strings.Join(r, " "))}
		}
		if _, dup := out[tp]; dup {
			return nil, &CheckpointError{File: path, Line: line, Reason: fmt.Sprintf("duplicate entry for %s", tp)}
		}
		out[tp] = off
	}
	return out, nil
}

// WriteOffsetCheckpoint atomically replaces a per-data-dir offsets checkpoint.
func WriteOffsetCheckpoint(fsys vfs.FS, dir, name string, offsets map[TopicPartition]int64) error {
	rows := make([]string, 0, len(offsets))
	for tp, off := range offsets {
		rows = append(rows, fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, off))
	}
	slices.Sort(rows)
	return writeCheckpoint(fsys, dir, name, rows)
}

// readEpochCheckpoint reads leader-epoch-checkpoint ("epoch startOffset").
func readEpochCheckpoint(fsys vfs.FS, dir string) ([]EpochEntry, bool, error) {
	path := dir + "/" + epochCheckpointFile
	rows, found, err := readCheckpoint(fsys, path, 2)
	if err != nil || !found {
		return nil, found, err
	}
	out := make([]EpochEntry, 0, len(rows))
	for i, r := range rows {
		line := i + 3
		e, err := parseInt(path, line, "epoch", r[0], 32)
		if err != nil {
			return nil, true, err
		}
		off, err := parseInt(path, line, "start offset", r[1], 64)
		if err != nil {
			return nil, true, err
		}
		if e < 0 || off < 0 {
			return nil, true, &CheckpointError{File: path, Line: line, Reason: fmt.Sprintf("negative entry %q", strings.Join(r, " "))}
		}
		if n := len(out); n > 0 && (int32(e) <= out[n-1].Epoch || off < out[n-1].StartOffset) {
			return nil, true, &CheckpointError{File: path, Line: line, Reason: fmt.Sprintf("entry %d %d does not follow %d %d", e, off, out[n-1].Epoch, out[n-1].StartOffset)}
		}
		out = append(out, EpochEntry{Epoch: int32(e), StartOffset: off})
	}
	return out, true, nil
}

func writeEpochCheckpoint(fsys vfs.FS, dir string, entries []EpochEntry) error {
	rows := make([]string, len(entries))
	for i, e := range entries {
		rows[i] = fmt.Sprintf("%d %d", e.Epoch, e.StartOffset)
	}
	return writeCheckpoint(fsys, dir, epochCheckpointFile, rows)
}

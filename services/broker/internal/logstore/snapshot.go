package logstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// A producer snapshot "<offset>.snapshot" holds the producer table as of
// offset (covering every batch below it):
//
//	version u16 | crc32c u32 of the rest | count u32 |
//	count × { pid i64 | epoch i16 | lastTimestamp i64 | n u8 |
//	          n × { firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64 | timestamp i64 } }
//
// Unlike Kafka, which keeps only the last batch, all retained batches are
// kept, so duplicate detection survives a restart intact.

const (
	snapshotVersion   = 1
	snapshotHeader    = 2 + 4
	snapshotBatchSize = 4 + 4 + 8 + 8 + 8
)

var snapshotCRC = crc32.MakeTable(crc32.Castagnoli)

func encodeSnapshot(ps *producerState) []byte {
	buf := make([]byte, snapshotHeader, snapshotHeader+4+len(ps.producers)*64)
	binary.BigEndian.PutUint16(buf, snapshotVersion)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(ps.producers)))
	for _, pid := range slices.Sorted(maps.Keys(ps.producers)) {
		e := ps.producers[pid]
		buf = binary.BigEndian.AppendUint64(buf, uint64(pid))
		buf = binary.BigEndian.AppendUint16(buf, uint16(e.Epoch))
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.LastTimestamp))
		buf = append(buf, byte(len(e.Batches)))
		for _, b := range e.Batches {
			buf = binary.BigEndian.AppendUint32(buf, uint32(b.FirstSeq))
			buf = binary.BigEndian.AppendUint32(buf, uint32(b.LastSeq))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.FirstOffset))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.LastOffset))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.Timestamp))
		}
	}
	binary.BigEndian.PutUint32(buf[2:], crc32.Checksum(buf[snapshotHeader:], snapshotCRC))
	return buf
}

func decodeSnapshot(data []byte) (*producerState, error) {
	if len(data) < snapshotHeader+4 {
		return nil, fmt.Errorf("%d bytes is too short", len(data))
	}
	if v := binary.BigEndian.Uint16(data); v != snapshotVersion {
		return nil, fmt.Errorf("unsupported version %d", v)
	}
	if got, want := crc32.Checksum(data[snapshotHeader:], snapshotCRC), binary.BigEndian.Uint32(data[2:]); got != want {
		return nil, fmt.Errorf("crc mismatch: stored %#08x, computed %#08x", want, got)
	}
	p := data[snapshotHeader:]
	n := binary.BigEndian.Uint32(p)
	p = p[4:]
	ps := newProducerState()
	for i := range n {
		if len(p) < 8+2+8+1 {
			return nil, fmt.Errorf("entry %d truncated", i)
		}
		pid := int64(binary.BigEndian.Uint64(p))
		e := &producerEntry{Epoch: int16(binary.BigEndian.Uint16(p[8:])), LastTimestamp: int64(binary.BigEndian.Uint64(p[10:]))}
		nb := int(p[18])
		p = p[19:]
		if nb > batchesToRetain || len(p) < nb*snapshotBatchSize {
			return nil, fmt.Errorf("entry %d: %d batches do not fit", i, nb)
		}
		for range nb {
			e.Batches = append(e.Batches, producerBatch{
				FirstSeq:    int32(binary.BigEndian.Uint32(p)),
				LastSeq:     int32(binary.BigEndian.Uint32(p[4:])),
				FirstOffset: int64(binary.BigEndian.Uint64(p[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(p[16:])),
				Timestamp:   int64(binary.BigEndian.Uint64(p[24:])),
			})
			p = p[snapshotBatchSize:]
		}
		ps.producers[pid] = e
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(p))
	}
	return ps, nil
}

// writeSnapshot writes the producer table as of offset; durable fsyncs the
// file and the directory, otherwise the caller arranges that (syncSnapshot).
func writeSnapshot(fsys vfs.FS, dir string, offset int64, ps *producerState, durable bool) error {
	name := offsetName(offset, snapshotSuffix)
	write := vfs.WriteFileAtomic
	if !durable {
		write = vfs.ReplaceFile
	}
	if err := write(fsys, dir, name, encodeSnapshot(ps)); err != nil {
		return storageErr(err, "writing producer snapshot %s/%s", dir, name)
	}
	return nil
}

// listSnapshots returns the offsets of the snapshot files in dir, ascending.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, storageErr(err, "listing %s", dir)
	}
	var out []int64
	for _, e := range ents {
		if off, ok := parseOffsetName(e.Name(), snapshotSuffix); ok {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out, nil
}

// retireSnapshotsLocked renames the snapshots at offs out of the log now and
// unlinks them in the background, as segments are retired (segment.retire).
// The caller holds mu.
func (l *Log) retireSnapshotsLocked(offs []int64) error {
	var retired []string
	defer func() { l.unlinkInBackgroundLocked(retired) }()
	for _, off := range offs {
		p := l.dir + "/" + offsetName(off, snapshotSuffix)
		switch err := l.fs.Rename(p, p+deletedSuffix); {
		case err == nil:
			retired = append(retired, p+deletedSuffix)
		case !vfs.IsNotExist(err):
			return storageErr(err, "retiring %s", p)
		}
	}
	return nil
}

func removeSnapshot(fsys vfs.FS, dir string, off int64) error {
	p := dir + "/" + offsetName(off, snapshotSuffix)
	if err := fsys.Remove(p); err != nil && !vfs.IsNotExist(err) {
		return storageErr(err, "deleting %s", p)
	}
	return nil
}

// syncSnapshot fsyncs the snapshot at offset; one deleted meanwhile (by a
// truncation or a newer roll) needs nothing.
func syncSnapshot(fsys vfs.FS, dir string, offset int64) error {
	p := dir + "/" + offsetName(offset, snapshotSuffix)
	f, err := fsys.Open(p)
	if vfs.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return storageErr(err, "opening %s", p)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return storageErr(err, "syncing %s", p)
	}
	return nil
}

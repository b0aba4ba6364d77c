package logstore

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"tidemark.io/services/recordbatch"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func equalEntries(a, b []EpochEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// putMaxTimestamp rewrites a batch's maxTimestamp and its CRC.
func putMaxTimestamp(b recordbatch.Batch, ts int64) {
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

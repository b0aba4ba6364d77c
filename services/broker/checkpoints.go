package broker

import (
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
)

// CheckpointedHighWatermarks reads the HW checkpoint a stopped broker left
// in one of its log directories (replication-offset-checkpoint), topic →
// partition → HW: what a restart starts each replica's HW from. Tests and
// tools compare it with the HWs the broker showed while it ran.
func CheckpointedHighWatermarks(logDir string) (map[string]map[int32]int64, error) {
	hws, err := logstore.ReadOffsetCheckpoint(vfs.OS, logDir, "replication-offset-checkpoint")
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]int64{}
	for tp, hw := range hws {
		if out[tp.Topic] == nil {
			out[tp.Topic] = map[int32]int64{}
		}
		out[tp.Topic][tp.Partition] = hw
	}
	return out, nil
}

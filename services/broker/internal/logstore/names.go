package logstore

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// File names in a partition directory and in a data directory.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	snapshotSuffix  = ".snapshot"
	tmpSuffix       = ".tmp"
	deletingSuffix  = ".deleting"
	deletedSuffix   = ".deleted" // a retired segment file, unlinked in the background

	epochCheckpointFile     = "leader-epoch-checkpoint"
	hwCheckpointFile        = "replication-offset-checkpoint"
	recoveryCheckpointFile  = "recovery-point-offset-checkpoint"
	logStartCheckpointFile  = "log-start-offset-checkpoint"
	cleanShutdownMarkerFile = ".tidemark_cleanshutdown"
)

// offsetName is the 20-digit zero-padded name segments and snapshots use.
func offsetName(off int64, suffix string) string { return fmt.Sprintf("%020d%s", off, suffix) }

// parseOffsetName parses "<20 digits><suffix>".
func parseOffsetName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	return off, err == nil && off >= 0
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is the partition's directory name, "<topic>-<partition>".
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate checks the topic name against Kafka's rules (which also keep it
// safe as a file name and a checkpoint field).
func (tp TopicPartition) Validate() error {
	if !legalTopic.MatchString(tp.Topic) || tp.Topic == "." || tp.Topic == ".." {
		return fmt.Errorf("illegal topic name %q", tp.Topic)
	}
	if tp.Partition < 0 {
		return fmt.Errorf("negative partition %d", tp.Partition)
	}
	return nil
}

// ParseTopicPartition parses a directory name "<topic>-<partition>"; the
// topic may itself contain '-'.
func ParseTopicPartition(dir string) (TopicPartition, error) {
	i := strings.LastIndexByte(dir, '-')
	if i <= 0 {
		return TopicPartition{}, fmt.Errorf("%q is not <topic>-<partition>", dir)
	}
	p, err := strconv.ParseInt(dir[i+1:], 10, 32)
	if err != nil || strconv.FormatInt(p, 10) != dir[i+1:] {
		return TopicPartition{}, fmt.Errorf("%q is not <topic>-<partition>", dir)
	}
	tp := TopicPartition{Topic: dir[:i], Partition: int32(p)}
	if err := tp.Validate(); err != nil {
		return TopicPartition{}, err
	}
	return tp, nil
}

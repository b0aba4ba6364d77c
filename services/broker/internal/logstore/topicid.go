package logstore

import (
	"fmt"
	"strings"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// partitionMetadataFile records which topic a partition directory belongs
// to, in Kafka's format (KIP-516): "version: 0" and "topic_id: <id>". A
// topic deleted while one of its replicas was offline leaves that replica's
// directory behind; when a topic of the same name is created again, the id
// tells the old log from the new topic's, so the old records are never
// served as the new topic's.
const partitionMetadataFile = "partition.metadata"

// TopicID is the topic id recorded in the partition directory; "" when
// none is (a log created before ids were recorded, or whose id is not
// known yet).
func (l *Log) TopicID() string {
	if id := l.topicID.Load(); id != nil {
		return *id
	}
	return ""
}

// SetTopicID records the topic id, durably, if the log has none yet. It
// refuses to change a recorded id: a log of another topic must be deleted,
// not relabelled.
func (l *Log) SetTopicID(id string) error {
	if id == "" || strings.ContainsAny(id, "\n\r") {
		return fmt.Errorf("logstore: invalid topic id %q", id)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch cur := l.TopicID(); cur {
	case id:
		return nil
	case "":
	default:
		return fmt.Errorf("logstore: %s belongs to topic id %s, not %s", l.dir, cur, id)
	}
	body := fmt.Sprintf("version: 0\ntopic_id: %s\n", id)
	if err := vfs.WriteFileAtomic(l.fs, l.dir, partitionMetadataFile, []byte(body)); err != nil {
		return storageErr(err, "writing %s/%s", l.dir, partitionMetadataFile)
	}
	l.topicID.Store(&id)
	return nil
}

// readTopicID reads partition.metadata; "" when the file is absent.
func readTopicID(fsys vfs.FS, dir string) (string, error) {
	path := dir + "/" + partitionMetadataFile
	data, err := vfs.ReadFile(fsys, path)
	if vfs.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", storageErr(err, "reading %s", path)
	}
	var version, id string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return "", &CheckpointError{File: path, Reason: fmt.Sprintf("bad line %q", line)}
		}
		switch strings.TrimSpace(k) {
		case "version":
			version = strings.TrimSpace(v)
		case "topic_id":
			id = strings.TrimSpace(v)
		}
	}
	if version != "0" || id == "" {
		return "", &CheckpointError{File: path, Reason: fmt.Sprintf("want version 0 and a topic_id, got version %q topic_id %q", version, id)}
	}
	return id, nil
}

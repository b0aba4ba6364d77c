package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/clustertest/history"
)

// Faults and elections tests bring about, and values they write: shared by
// this package's tests and kafkaclients'.

// Values are n distinct values prefix-0, prefix-1, ...
func Values(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// QuickExpiry forgets an idle producer within about two seconds.
var QuickExpiry = map[string]string{"producer.id.expiration.ms": "1500", "log.retention.check.interval.ms": "200"}

// CutEtcdForAll stalls (or, with cut false, resumes) every broker's and
// controller's link to etcd; etcd itself runs on.
func (c *Cluster) CutEtcdForAll(cut bool) {
	for _, b := range c.etcdLinks {
		if cut {
			b.Pause()
		} else {
			b.Resume()
		}
	}
	for _, b := range c.ctrlEtcd {
		if cut {
			b.Pause()
		} else {
			b.Resume()
		}
	}
}

// KillController ends controller id's term as kill -9 would (its lease
// runs out unreleased, its links stall) and returns the standby that took
// office with a newer epoch; then it starts id again at once.
func (c *Cluster) KillController(id, epoch int32) (int32, int32) {
	c.T.Helper()
	c.PauseController(id)
	var next, nextEpoch int32
	c.WaitFor(15*time.Second, "a standby in office after controller "+fmt.Sprint(id), func() bool {
		next, nextEpoch = c.ActiveOtherThan(id)
		return next >= 0
	})
	if nextEpoch <= epoch {
		c.T.Fatalf("controller %d took office with epoch %d after epoch %d", next, nextEpoch, epoch)
	}
	c.ResumeController(id) // only to let the old process exit
	c.StopController(id)
	c.StartController(id)
	return next, nextEpoch
}

// ActiveOtherThan is the controller other than id that holds office, and
// its epoch; -1 when none does.
func (c *Cluster) ActiveOtherThan(id int32) (int32, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, ct := range c.controllers {
		if e, ok := ct.Active(); ok && other != id {
			return other, e
		}
	}
	return -1, 0
}

// ElectPreferred asks the active controller for a preferred election of
// every given partition.
func (c *Cluster) ElectPreferred(tps []history.TP) error {
	req := &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, &commonv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Admin().ElectLeaders(ctx, req)
	return err
}

// LogBuf collects a cluster's logs (Cluster.SetLog) for a test to read.
type LogBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write takes a log line; LogBuf is an io.Writer for slog's handlers.
func (l *LogBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Lines are the log lines holding every one of parts.
func (l *LogBuf) Lines(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

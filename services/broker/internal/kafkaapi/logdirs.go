package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// LogDir is one of the broker's log dirs as DescribeLogDirs shows it.
type LogDir struct {
	Path string
	// Err is why the dir is offline; nil while it serves.
	Err  error
	Logs []LogDirPartition
}

// LogDirPartition is one log in a dir.
type LogDirPartition struct {
	Topic     string
	Partition int32
	Bytes     int64
}

// handleDescribeLogDirs answers for this broker's own dirs (kafka-log-dirs.sh
// asks every broker): each dir, KAFKA_STORAGE_ERROR for an offline one, and
// the size of each log asked for (all when Topics is null). Kafka asks
// DESCRIBE on the cluster, as DescribeCluster does.
func (s *Server) handleDescribeLogDirs(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if err := s.authorize(ctx, adminv1.AdminService_DescribeCluster_FullMethodName, &adminv1.DescribeClusterRequest{}); err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	var want map[string]map[int32]bool
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			ps := map[int32]bool{}
			for _, p := range t.Partitions {
				ps[p] = true
			}
			want[t.Topic] = ps
		}
	}
	for _, d := range s.opts.LogDirs() {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.Path
		if d.Err != nil {
			rd.ErrorCode = int16(kerr.KafkaStorageError)
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		byTopic := map[string]int{}
		for _, l := range d.Logs {
			if want != nil && !want[l.Topic][l.Partition] {
				continue
			}
			i, ok := byTopic[l.Topic]
			if !ok {
				i = len(rd.Topics)
				byTopic[l.Topic] = i
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = l.Topic
				rd.Topics = append(rd.Topics, t)
			}
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			p.Partition, p.Size = l.Partition, l.Bytes
			rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, p)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp
}

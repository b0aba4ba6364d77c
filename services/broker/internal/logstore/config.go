package logstore

import (
	"fmt"
	"math"
	"strings"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// Config is a partition log's configuration. Field names follow Kafka's topic
// configs; DefaultConfig gives Kafka's defaults.
type Config struct {
	// SegmentBytes rolls a segment when the next append would exceed it
	// (segment.bytes).
	SegmentBytes int64
	// SegmentMs rolls a segment this long after its first append (segment.ms);
	// a compacted log's rolls at MaxCompactionLag if that is sooner.
	SegmentMs time.Duration
	// IndexIntervalBytes is how many log bytes separate offset-index entries
	// (index.interval.bytes); 0 indexes every batch.
	IndexIntervalBytes int64
	// RetentionMs deletes segments whose newest record is older than this
	// (retention.ms); negative keeps them forever.
	RetentionMs time.Duration
	// RetentionBytes deletes the oldest segments while the log is larger than
	// this (retention.bytes); negative means no limit.
	RetentionBytes int64
	// MaxMessageBytes is the largest batch a leader accepts (max.message.bytes).
	MaxMessageBytes int
	// FlushMessages fsyncs after this many appended records (flush.messages);
	// zero or negative never does, Kafka's default: durability comes from
	// replication.
	FlushMessages int64
	// FlushInterval fsyncs data older than this (flush.ms), checked by the
	// Manager; zero or negative never does.
	FlushInterval time.Duration
	// TimestampBeforeMaxMs and TimestampAfterMaxMs refuse a leader append
	// whose CreateTime record timestamps lie further behind or ahead of the
	// log's clock (message.timestamp.before.max.ms / after.max.ms, KIP-937);
	// math.MaxInt64 checks nothing.
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// FsyncEveryAppend makes every append durable before it returns.
	FsyncEveryAppend bool
	// WritebackBytes starts the kernel writing the active segment back each
	// time this many bytes were appended since the last start (Linux
	// sync_file_range, no fsync: durability is unchanged). 0 picks
	// DefaultWritebackBytes; negative leaves writeback to the kernel.
	WritebackBytes int64
	// FollowerCachedBytes is how much of a follower's log, its
	// latest bytes, stays in the page cache: the bytes before that, once
	// written back, are dropped from it as the follower appends (Linux
	// posix_fadvise DONTNEED; clean pages only, durability is unchanged).
	// Only the leader's log is read by consumers; a follower's is read if
	// it becomes leader, its tail first. 0 picks DefaultFollowerCachedBytes;
	// negative keeps every page, as Kafka does. At least
	// 4 * WritebackBytes, so what it drops has been written back; the drops
	// ride on the writebacks, so with those off nothing is dropped.
	FollowerCachedBytes int64
	// Preallocate (preallocate) reserves each segment's disk blocks, up to
	// SegmentBytes, before it is written (see spare.go): appends then fill
	// blocks the file system already gave the file. Kafka's preallocate
	// sets the file's length; here the size stays the committed bytes, so
	// nothing else about a segment changes.
	Preallocate bool
	// ProducerIDExpiration forgets idempotent producers idle this long
	// (producer.id.expiration.ms); zero or negative never does.
	ProducerIDExpiration time.Duration

	// CleanupPolicy is cleanup.policy: "delete" (also ""), "compact" or
	// "compact,delete". Retention applies only with delete, the log cleaner
	// only with compact.
	CleanupPolicy string
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the cleaner picks
	// a compacted log only when this share of its cleanable bytes is dirty.
	MinCleanableDirtyRatio float64
	// DeleteRetention is delete.retention.ms: how long a tombstone is kept
	// after the segment holding it was cleaned.
	DeleteRetention time.Duration
	// MinCompactionLag (min.compaction.lag.ms) keeps segments with records
	// younger than this out of cleaning; MaxCompactionLag
	// (max.compaction.lag.ms, zero = none) makes a log with a dirty segment
	// older than this cleanable whatever its dirty ratio.
	MinCompactionLag time.Duration
	MaxCompactionLag time.Duration
}

// Compacted reports whether the log cleaner compacts this log.
func (c Config) Compacted() bool { return strings.Contains(c.CleanupPolicy, "compact") }

// rollAfter is how long the active segment takes appends before the next
// one rolls it: segment.ms, and for a compacted log at most
// max.compaction.lag.ms, as Kafka's LogConfig.maxSegmentMs. The cleaner never
// cleans the active segment, so without it a superseded value or a deleted
// key stayed up to segment.ms (7 days by default), whatever the lag.
func (c Config) rollAfter() time.Duration {
	if c.Compacted() && c.MaxCompactionLag > 0 {
		return min(c.SegmentMs, c.MaxCompactionLag)
	}
	return c.SegmentMs
}

// RetentionDeletes reports whether retention.ms and retention.bytes apply.
func (c Config) RetentionDeletes() bool {
	return c.CleanupPolicy == "" || strings.Contains(c.CleanupPolicy, "delete")
}

// DefaultConfig returns Kafka's defaults.
// DefaultWritebackBytes is the writeback step of an active segment. Left to
// the kernel, a file's dirty pages are written when the file's first dirty
// page is 30 s old (vm.dirty_expire_centisecs): all of them at once. Under a
// steady 45 MB/s on three replicas of one disk that was over a gigabyte
// every 30 s, and two seconds of acknowledgements at 25-60 ms instead of 5.
const DefaultWritebackBytes = 1 << 20

// DefaultFollowerCachedBytes is the tail of a follower's log
// kept in the page cache. Dropping the rest lets the follower's next
// appends reuse those pages instead of claiming new ones: on a virtual
// machine that hands free memory back to its host, a page new to the page
// cache cost 1.4-2.9 µs per KiB appended against 0.35 µs for a reused one
// (measured here), and it was the largest part of a follower's CPU time at
// 45 MB/s. It also leaves the memory to the leaders' logs, which consumers
// read.
const DefaultFollowerCachedBytes = 64 << 20

// followerCacheWindow is FollowerCachedBytes with its default and floor;
// 0 keeps every page.
func (c Config) followerCacheWindow() int64 {
	switch {
	case c.FollowerCachedBytes == 0:
		return DefaultFollowerCachedBytes
	case c.FollowerCachedBytes < 0:
		return 0
	}
	return max(c.FollowerCachedBytes, 4*c.writebackStep())
}

// writebackStep is WritebackBytes with its default; 0 is off.
func (c Config) writebackStep() int64 {
	switch {
	case c.WritebackBytes == 0:
		return DefaultWritebackBytes
	case c.WritebackBytes < 0:
		return 0
	}
	return c.WritebackBytes
}

func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * time.Hour,
		IndexIntervalBytes:     4096,
		RetentionMs:            7 * 24 * time.Hour,
		RetentionBytes:         -1,
		MaxMessageBytes:        1<<20 + 12,
		ProducerIDExpiration:   24 * time.Hour,
		TimestampBeforeMaxMs:   math.MaxInt64,
		TimestampAfterMaxMs:    math.MaxInt64,
		CleanupPolicy:          "delete",
		MinCleanableDirtyRatio: 0.5,
		DeleteRetention:        24 * time.Hour,
	}
}

// Validate reports the first unusable field, as INVALID_CONFIG.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return kerr.BadField(kerr.InvalidConfig, field, format, args...)
	}
	switch {
	case c.SegmentBytes < recordbatch.HeaderSize || c.SegmentBytes > math.MaxInt32:
		return bad("segment.bytes", "%d is outside [%d, %d]", c.SegmentBytes, recordbatch.HeaderSize, math.MaxInt32)
	case c.SegmentMs <= 0:
		return bad("segment.ms", "%v must be positive", c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return bad("index.interval.bytes", "%d is negative", c.IndexIntervalBytes)
	case c.MaxMessageBytes < 0:
		// 0 is Kafka's smallest max.message.bytes (atLeast(0)), which the
		// registry accepts: every batch is then too large.
		return bad("max.message.bytes", "%d is negative", c.MaxMessageBytes)
	case c.TimestampBeforeMaxMs < 0:
		return bad("message.timestamp.before.max.ms", "%d is negative", c.TimestampBeforeMaxMs)
	case c.TimestampAfterMaxMs < 0:
		return bad("message.timestamp.after.max.ms", "%d is negative", c.TimestampAfterMaxMs)
	case !validPolicy(c.CleanupPolicy):
		return bad("cleanup.policy", "%q is not delete, compact or compact,delete", c.CleanupPolicy)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return bad("min.cleanable.dirty.ratio", "%v is outside [0, 1]", c.MinCleanableDirtyRatio)
	case c.DeleteRetention < 0:
		return bad("delete.retention.ms", "%v is negative", c.DeleteRetention)
	case c.MinCompactionLag < 0:
		return bad("min.compaction.lag.ms", "%v is negative", c.MinCompactionLag)
	case c.MaxCompactionLag < 0:
		return bad("max.compaction.lag.ms", "%v is negative", c.MaxCompactionLag)
	}
	return nil
}

func validPolicy(p string) bool {
	switch p {
	case "", "delete", "compact", "compact,delete", "delete,compact":
		return true
	}
	return false
}

func (c Config) String() string {
	return fmt.Sprintf("segment.bytes=%d segment.ms=%v retention.ms=%v retention.bytes=%d max.message.bytes=%d flush.messages=%d flush.ms=%v fsync.every.append=%v cleanup.policy=%s",
		c.SegmentBytes, c.SegmentMs, c.RetentionMs, c.RetentionBytes, c.MaxMessageBytes, c.FlushMessages, c.FlushInterval, c.FsyncEveryAppend, c.CleanupPolicy)
}

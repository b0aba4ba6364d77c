// Package logstore is the broker's on-disk partition log: segments with
// sparse offset and time indexes, leader-epoch cache, idempotent-producer
// state, checkpoints, recovery, retention, and a Manager per data directory.
// All I/O goes through vfs.FS.
//
// # Layout
//
// A partition replica lives in "<data dir>/<topic>-<partition>/":
//
//	00000000000000000000.log        batches, back to back (recordbatch format)
//	00000000000000000000.index      relative base offset (u32) -> position (u32), one per index.interval.bytes
//	00000000000000000000.timeindex  max timestamp so far (i64) -> relative offset (u32)
//	00000000000000001234.snapshot   producer table as of offset 1234 (two newest kept)
//	leader-epoch-checkpoint         "epoch startOffset" lines
//	cleaner-offset-checkpoint       compacted logs: first dirty offset, cleaned segments
//
// and the data directory holds replication-offset-checkpoint,
// recovery-point-offset-checkpoint, log-start-offset-checkpoint and the
// .tidemark_cleanshutdown marker.
//
// # Lock rules
//
// A Log has four locks. Their order is partial: mu before syncMu before
// fileMu, flushMu before syncMu, and mu and flushMu never held together.
// The log cleaner's cleanMu (one pass at a time) comes before all of them.
//
//   - mu serialises writers: appends, truncations, rolls, retention, epoch
//     assignment, Close. It guards the producer table and the writer-owned
//     segment fields.
//   - flushMu serialises flushes. It is taken before syncMu and never while
//     mu is held (an append that must fsync releases mu first), so fsync runs
//     without blocking appends.
//   - syncMu is held for reading by the log's long file work, which waits
//     for the device: flushes, the writebacks appends start (with a
//     follower's page-cache drops), spare segments and reservation
//     releases, the deferred epoch checkpoint, retention's renames; and for
//     writing (under mu, before fileMu) by truncation, the cleaner's swaps,
//     Close and Abandon, which must not change files under that work.
//   - fileMu is held for reading by Read, OffsetForTimestamp, the
//     cleaner's chunk reads and snapshot pruning (short, no other lock
//     held), and for writing (under mu) by anything that shrinks, deletes
//     or closes files: the syncMu writers above and retention. So a reader
//     never sees a file change under it except by growth. Retention takes
//     fileMu alone when what it deletes is flushed: no flush touches such
//     segments, and waiting for one's fsync would hold up the partition.
//
// The indexes' and the epoch cache's locks are leaves. The FileCache's
// mutex ranks above them: every segment file call borrows its descriptor
// from it (filecache.go), under any of the locks above. The whole broker's
// order, and the build tag that checks it, are in services/broker/LOCKORDER.md.
//
// The RecoveryPointLowered hook runs under mu; the Manager's hook takes only
// its rpMu and map mutex, and the Manager calls the caller's HW getter with
// none of its locks held.
//
// Appends publish their data by storing the segment's committed size and
// then the LEO, both atomically; the segment list is copy-on-write behind an
// atomic pointer. A reader loads the LEO first and never returns bytes at or
// above it, so it sees only whole batches written before it started.
// Index entries of the active segment are guarded by the index's own
// RWMutex, held only for the length of a lookup or an append.
//
// # Durability
//
// Appends reach the page cache with one positional write; fsync happens on
// flush (flush.messages, flush.ms, Flush, Close), on every append with
// FsyncEveryAppend, and for a sealed segment in the background right after
// it is rolled (Close waits for it). A roll itself fsyncs nothing under mu:
// the new files' directory entries and its producer snapshot are synced by
// the next flush, with those of every roll since the last one, before it
// moves the recovery point (flushUpTo). The
// recovery point is the offset below which everything is known to be synced;
// after a crash only what is above it is re-validated. Truncations are
// synced before they return, so truncated data cannot come back.
package logstore

package logstore

import (
	"testing"

	"tidemark.io/services/recordbatch"
)

// followerBatch is a batch as a follower receives it: placed at offset
// base by a leader of epoch 0.
func followerBatch(base int64, records, valueSize int) []byte {
	b := plain(records, valueSize, 1000+base).build()
	recordbatch.Batch(b).SetBaseOffset(base)
	recordbatch.Batch(b).SetPartitionLeaderEpoch(0)
	return b
}

// dropConfig has small steps: writeback every 64 KiB, a 256 KiB tail.
func dropConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.WritebackBytes = 64 << 10
	cfg.FollowerCachedBytes = 256 << 10
	return cfg
}

// A follower's appends drop the pages behind its tail from the page cache:
// page-aligned ranges, in order and without gaps from each segment's start,
// never within FollowerCachedBytes of the log's end; a sealed segment goes
// whole once the active one holds the window.
func TestFollowerAppendsDropPagesBehindTheirTail(t *testing.T) {
	dfs := newRecordFS(t)
	cfg := dropConfig()
	l := openLog(t, dfs, cfg, newClock())
	for l.LogEndOffset() < 2500 { // about 2.5 MiB: three segments
		if _, err := l.AppendAsFollower(followerBatch(l.LogEndOffset(), 20, 1000)); err != nil {
			t.Fatal(err)
		}
		l.bg.Wait() // one writeback at a time: let each finish, so none is skipped
	}
	segs := l.segments()
	got := dfs.logDrops()
	if act := segs[len(segs)-1].size.Load(); act < cfg.FollowerCachedBytes+2*cfg.WritebackBytes {
		t.Fatalf("the active segment holds %d bytes; the test needs it past the window and a step", act)
	}
	if len(segs) < 3 || len(got) != len(segs) {
		t.Fatalf("%d segments, drops on %d log files: %v", len(segs), len(got), got)
	}
	total := int64(0)
	for i, s := range segs {
		size := s.size.Load()
		end := int64(0)
		ranges := got[s.logPath]
		sealed, wholeEnd := i < len(segs)-1, int64(0)
		if sealed {
			// The last drop of a sealed segment is the whole file, from its
			// start (pages an earlier drop met under writeback are clean now).
			last := ranges[len(ranges)-1]
			if last[0] != 0 {
				t.Fatalf("sealed segment %d: last drop %v; want the whole file from 0", i, last)
			}
			ranges, wholeEnd = ranges[:len(ranges)-1], last[1]
		}
		for _, r := range ranges {
			if r[0] != end || r[0]%dropAlign != 0 || r[1]%dropAlign != 0 || r[1] <= r[0] {
				t.Fatalf("%s: drop %v after %d; want page-aligned ranges that follow on: %v", s.logPath, r, end, got[s.logPath])
			}
			end = r[1]
		}
		end = max(end, wholeEnd)
		total += end
		if sealed {
			if end < size || end-size >= dropAlign {
				t.Fatalf("sealed segment %d (%d bytes): dropped up to %d; want all of it, to the page holding its end (the window is in the active one)", i, size, end)
			}
			continue
		}
		// The active segment's drops lag its end by the window, plus at
		// most one writeback step (drops come with writebacks) and a page.
		lag := size - end
		if lag < cfg.FollowerCachedBytes || lag > cfg.FollowerCachedBytes+cfg.WritebackBytes+dropAlign {
			t.Fatalf("segment %d (%d bytes): dropped up to %d, %d behind its end; want the last %d to %d bytes kept",
				i, size, end, lag, cfg.FollowerCachedBytes, cfg.FollowerCachedBytes+cfg.WritebackBytes+dropAlign)
		}
	}
	if st := l.Stats(); st.CacheDroppedBytes != total {
		t.Fatalf("stats count %d bytes dropped, the files saw %d", st.CacheDroppedBytes, total)
	}

	// A leader's appends keep every page, sealed segments' too: consumers
	// read the leader's log.
	lfs := newRecordFS(t)
	leader := openLog(t, lfs, cfg, newClock())
	fill(t, leader, 120, 20, 1000)
	leader.bg.Wait()
	if got := lfs.logDrops(); len(got) != 0 {
		t.Fatalf("a leader's appends dropped pages: %v", got)
	}

	// Off (negative, Kafka's way): a follower keeps every page too.
	ofs := newRecordFS(t)
	cfg.FollowerCachedBytes = -1
	off := openLog(t, ofs, cfg, newClock())
	for off.LogEndOffset() < 1200 {
		if _, err := off.AppendAsFollower(followerBatch(off.LogEndOffset(), 20, 1000)); err != nil {
			t.Fatal(err)
		}
		off.bg.Wait()
	}
	if got := ofs.logDrops(); len(got) != 0 {
		t.Fatalf("follower.cached.bytes off, yet pages were dropped: %v", got)
	}
}

// The window never falls below four writeback steps: a smaller one would
// drop pages the kernel is still writing (which it keeps, so the drop
// would be lost work).
func TestFollowerCacheWindowFloor(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct{ set, writeback, want int64 }{
		{0, 0, DefaultFollowerCachedBytes},
		{-1, 0, 0},
		{1, 0, 4 * DefaultWritebackBytes},
		{128 << 20, 0, 128 << 20},
		{1, 64 << 10, 256 << 10},
	} {
		cfg.FollowerCachedBytes, cfg.WritebackBytes = c.set, c.writeback
		if got := cfg.followerCacheWindow(); got != c.want {
			t.Errorf("FollowerCachedBytes %d, WritebackBytes %d: window %d, want %d", c.set, c.writeback, got, c.want)
		}
	}
}

// A truncation below where the writebacks and drops had reached makes them
// resume from the cut: the bytes appended again there are new to the page
// cache, and would otherwise wait for the kernel's writeback and stay
// cached for the life of the segment.
func TestFollowerWritebackAndDropsResumeFromATruncation(t *testing.T) {
	dfs := newRecordFS(t)
	cfg := dropConfig()
	l := openLog(t, dfs, cfg, newClock())
	appendTo := func(n int64) {
		t.Helper()
		for l.LogEndOffset() < n {
			if _, err := l.AppendAsFollower(followerBatch(l.LogEndOffset(), 20, 1000)); err != nil {
				t.Fatal(err)
			}
			l.bg.Wait()
		}
	}
	appendTo(700) // about 700 KiB of one 1 MiB segment
	seg := l.active()
	before := seg.droppedTo.Load()
	if before < 256<<10 {
		t.Fatalf("dropped up to %d before the truncation; the test needs more", before)
	}
	if _, err := l.TruncateTo(100); err != nil {
		t.Fatal(err)
	}
	if l.active() != seg {
		t.Fatal("the truncation changed the active segment; the test expects it cut")
	}
	cut := seg.size.Load()
	if cut >= before {
		t.Fatalf("cut at %d, above the drops' end %d", cut, before)
	}
	n := len(dfs.logDrops()[seg.logPath])
	w := len(dfs.logRanges()[seg.logPath])
	appendTo(700)
	if wb := dfs.logRanges()[seg.logPath][w:]; len(wb) == 0 || wb[0][0] != cut {
		t.Fatalf("writebacks after cutting at %d: %v; want the first to start at the cut", cut, wb)
	}
	after := dfs.logDrops()[seg.logPath][n:]
	if len(after) == 0 {
		t.Fatal("no drops after the truncation")
	}
	if want := cut &^ (dropAlign - 1); after[0][0] != want {
		t.Fatalf("first drop after cutting at %d: %v; want it to start at the cut's page, %d", cut, after[0], want)
	}
	if lag := seg.size.Load() - after[len(after)-1][1]; lag > cfg.FollowerCachedBytes+cfg.WritebackBytes+dropAlign {
		t.Fatalf("drops end %d behind the segment's end after appending again; want at most %d", lag, cfg.FollowerCachedBytes+cfg.WritebackBytes+dropAlign)
	}
}

// Right after a roll the window spans two segments: the sealed one keeps
// the part of it the new one does not hold yet, and goes whole once the
// new one holds the window.
func TestFollowerKeepsItsWindowAcrossARoll(t *testing.T) {
	dfs := newRecordFS(t)
	cfg := dropConfig()
	l := openLog(t, dfs, cfg, newClock())
	appendWhile := func(more func() bool) {
		t.Helper()
		for more() {
			if _, err := l.AppendAsFollower(followerBatch(l.LogEndOffset(), 20, 1000)); err != nil {
				t.Fatal(err)
			}
			l.bg.Wait()
		}
	}
	step, window := cfg.WritebackBytes, cfg.FollowerCachedBytes
	appendWhile(func() bool { return len(l.segments()) < 2 || l.active().size.Load() < 2*step })
	sealed, act := l.segments()[0], l.active()
	if act.size.Load() >= window-step {
		t.Fatalf("the new segment already holds %d bytes; the test needs it well inside the window", act.size.Load())
	}
	dropped := func() int64 {
		r := dfs.logDrops()[sealed.logPath]
		if len(r) == 0 {
			return 0
		}
		return r[len(r)-1][1]
	}
	// The window's share in the sealed segment, give or take the step the
	// drops ride on and a page.
	size := sealed.size.Load()
	share := window - act.size.Load()
	if lag := size - dropped(); lag < share || lag > share+step+dropAlign {
		t.Fatalf("sealed segment (%d bytes) dropped up to %d with %d bytes in the new one: %d kept, want %d to %d (the rest of the %d window)",
			size, dropped(), act.size.Load(), lag, share, share+step+dropAlign, window)
	}
	appendWhile(func() bool { return l.active().size.Load() < window+2*step })
	if end := dropped(); end < size || end-size >= dropAlign {
		t.Fatalf("sealed segment (%d bytes) dropped up to %d once the new one held the window; want all of it", size, end)
	}
}

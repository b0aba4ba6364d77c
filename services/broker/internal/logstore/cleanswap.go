package logstore

// The cleaner's swap of a cleaned group into the log, and its completion
// or removal at load after a crash (see clean.go).

import (
	"errors"
	"slices"
	"strings"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

func (l *Log) syncDir() error {
	if err := l.fs.SyncDir(l.dir); err != nil {
		return storageErr(err, "syncing %s", l.dir)
	}
	return nil
}

// swapIn replaces group by the committed swap segment, under mu and fileMu:
// appends wait only for deletions and renames, readers never see a file
// closed under them. If the group changed since it was read (retention), or
// any truncation happened since the pass built its key map (which may then
// name records that no longer exist, so the cleaned data could lack a key's
// only surviving value), the swap is undone instead.
func (l *Log) swapIn(group []*segment, built *segment, size int64, truncations int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncMu.Lock() // a flush may be syncing the segments swapped out
	defer l.syncMu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	base := group[0].base
	lp, ip, tp := segmentPaths(l.dir, base)
	segs := l.segments()
	i := slices.Index(segs, group[0])
	intact := l.checkWritableLocked() == nil && !l.filesClosed && i >= 0 && i+len(group) < len(segs) &&
		l.truncations.Load() == truncations
	for j, s := range group {
		if !intact || segs[i+j] != s {
			intact = false
			break
		}
	}
	if !intact {
		for _, p := range []string{lp, ip, tp} {
			if err := l.fs.Remove(p + swapSuffix); err != nil && !vfs.IsNotExist(err) {
				return l.fail(storageErr(err, "discarding %s", p+swapSuffix))
			}
		}
		if err := l.syncDir(); err != nil {
			return l.fail(err)
		}
		return ErrCleanAborted
	}
	// Commit: the log to .swap, durable before anything is deleted.
	if err := l.fs.Rename(lp+cleanedSuffix, lp+swapSuffix); err != nil {
		for _, p := range []string{lp + cleanedSuffix, ip + swapSuffix, tp + swapSuffix} {
			_ = l.fs.Remove(p)
		}
		return storageErr(err, "renaming %s", lp+cleanedSuffix)
	}
	if err := l.syncDir(); err != nil {
		// Whether the rename is durable is unknown: loading decides.
		return l.fail(err)
	}
	var retired []string
	defer func() { l.unlinkInBackgroundLocked(retired) }()
	for _, s := range group {
		names, err := s.retire(l.fs)
		retired = append(retired, names...)
		if err != nil {
			return l.fail(err)
		}
	}
	if err := l.syncDir(); err != nil {
		return l.fail(err)
	}
	for _, p := range []string{ip, tp, lp} {
		if err := l.fs.Rename(p+swapSuffix, p); err != nil {
			return l.fail(storageErr(err, "renaming %s", p+swapSuffix))
		}
	}
	if err := l.syncDir(); err != nil {
		return l.fail(err)
	}
	ns, _, err := openSegment(l.files, l.fs, l.dir, base)
	if err != nil {
		return l.fail(err)
	}
	ns.next, ns.offsetOfMaxTS, ns.lastTimeEntryTS = built.next, built.offsetOfMaxTS, built.lastTimeEntryTS
	ns.maxTS.Store(built.maxTS.Load())
	ns.indexesDurable.Store(true)
	ns.size.Store(size)
	out := make([]*segment, 0, len(segs)-len(group)+1)
	out = append(out, segs[:i]...)
	out = append(out, ns)
	out = append(out, segs[i+len(group):]...)
	l.publish(out)
	return nil
}

// createSegmentFiles is createSegment with explicit file names.
func createSegmentFiles(files *FileCache, fsys vfs.FS, dir string, base int64, lp, ip, tp string) (*segment, error) {
	s := &segment{base: base, dir: dir, logPath: lp, next: base, offsetOfMaxTS: base, lastTimeEntryTS: -1}
	s.maxTS.Store(-1)
	var err error
	if s.log, err = files.create(fsys, lp); err != nil {
		return nil, storageErr(err, "creating %s", lp)
	}
	if s.index, err = openIndex(files, fsys, ip, offsetEntrySize, true); err != nil {
		s.closeFiles()
		return nil, storageErr(err, "creating %s", ip)
	}
	if s.timeIndex, err = openIndex(files, fsys, tp, timeEntrySize, true); err != nil {
		s.closeFiles()
		return nil, storageErr(err, "creating %s", tp)
	}
	s.index.mem = make([]byte, 0, 1024)
	s.timeIndex.mem = make([]byte, 0, 1024)
	return s, nil
}

// finishSwaps runs before the segments are listed at load: it completes a
// cleaner swap that was committed (a "<base>.log.swap" exists) and removes
// the leftovers of one that was not (.cleaned files, index .swap files).
func (l *Log) finishSwaps() error {
	names, err := l.listNames()
	if err != nil {
		return err
	}
	for _, name := range names {
		base, ok := parseOffsetName(name, logSuffix+swapSuffix)
		if !ok {
			continue
		}
		swapPath := l.dir + "/" + name
		end, err := swapEnd(l.fs, swapPath)
		if err != nil {
			return err
		}
		replaced := 0
		for _, other := range names {
			b, ok := parseOffsetName(other, logSuffix)
			if !ok || b < base || b >= end {
				continue
			}
			lp, ip, tp := segmentPaths(l.dir, b)
			for _, p := range []string{lp, ip, tp} {
				if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
					return storageErr(err, "deleting %s", p)
				}
			}
			replaced++
		}
		if err := l.syncDir(); err != nil {
			return err
		}
		lp, ip, tp := segmentPaths(l.dir, base)
		for _, p := range []string{ip, tp} {
			if err := l.fs.Rename(p+swapSuffix, p); err != nil && !vfs.IsNotExist(err) {
				return storageErr(err, "renaming %s", p+swapSuffix)
			}
			// A missing index is rebuilt by loading.
		}
		if err := l.fs.Rename(swapPath, lp); err != nil {
			return storageErr(err, "renaming %s", swapPath)
		}
		if err := l.syncDir(); err != nil {
			return err
		}
		l.stats.completedSwaps.Add(1)
		l.logger.Warn("completed a cleaner swap interrupted by a crash", "segment", lp, "replaced_segments", replaced, "end_offset", end)
	}
	if names, err = l.listNames(); err != nil {
		return err
	}
	removed := false
	for _, name := range names {
		if strings.HasSuffix(name, cleanedSuffix) || strings.HasSuffix(name, swapSuffix) {
			if err := l.fs.Remove(l.dir + "/" + name); err != nil && !vfs.IsNotExist(err) {
				return storageErr(err, "deleting %s/%s", l.dir, name)
			}
			removed = true
		}
	}
	if removed {
		l.logger.Info("discarded an uncommitted cleaner pass")
		return l.syncDir()
	}
	return nil
}

func (l *Log) listNames() ([]string, error) {
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, storageErr(err, "listing partition directory %s", l.dir)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// swapEnd returns the offset after the last batch of a committed swap file,
// which was synced before it was committed and so must be whole.
func swapEnd(fsys vfs.FS, path string) (int64, error) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return 0, storageErr(err, "reading %s", path)
	}
	end := int64(-1)
	for b, err := range recordbatch.All(data) {
		if err == nil {
			err = b.ValidateStored()
		}
		if err != nil {
			return 0, storageErr(err, "reading committed cleaner swap %s", path)
		}
		end = b.NextOffset()
	}
	if end < 0 {
		return 0, storageErr(errors.New("no batch"), "reading committed cleaner swap %s", path)
	}
	return end, nil
}

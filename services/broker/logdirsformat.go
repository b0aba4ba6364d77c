package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/broker/internal/metaprops"
)

// Lost disks. Each log dir holds a meta.properties naming its broker, and
// the data dir's lists the log dirs the broker formatted. A listed dir
// found without its meta.properties (missing, or an empty mount point) is
// a lost disk, not a new one: created empty, its partitions would look
// new, and a broker that was the last ISR member of one would lead it with
// an empty log, losing every acknowledged write. Such a dir stays offline,
// which keeps the broker from creating any log it cannot find (logdirs'
// blind rule), until the disk is back or the operator says it was replaced
// (--log.dirs.replaced). A replaced dir, or one left out of --log.dirs, is
// recorded until the controller's full push of the broker's roles found a
// log for every partition it leads or is in the ISR of (replica/lostlogs.go).

// prepareLogDirs creates the data dir and the log dirs that may be
// created, checks and records their owner, and returns the dirs to keep
// offline and the dirs whose logs may be lost (replaced or left out).
func prepareLogDirs(cfg Config, log *slog.Logger) (lost map[string]error, replaced []string, err error) {
	if err := vfs.MkdirAllDurable(vfs.OS, cfg.DataDir); err != nil {
		return nil, nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if err := checkBrokerID(cfg.DataDir, cfg.ID); err != nil {
		return nil, nil, err
	}
	m, _, err := metaprops.Read(cfg.DataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--data.dir %s: %w", cfg.DataDir, err)
	}
	was := m
	dirs := cfg.logDirs()
	var format []string
	for _, d := range dirs {
		formatted, err := hasMetaProps(d)
		if err != nil {
			return nil, nil, err
		}
		if !formatted && slices.Contains(m.LogDirs, d) {
			if !slices.Contains(cfg.LogDirsReplaced, d) {
				if lost == nil {
					lost = map[string]error{}
				}
				lost[d] = fmt.Errorf("this broker's logs were here (%s lists it), but it is missing or empty: "+
					"an unmounted disk? Mount it back and restart; if the disk was replaced, restart with --log.dirs.replaced=%s",
					cfg.DataDir+"/"+metaprops.FileName, d)
				continue
			}
			log.Warn("Putting a replaced log dir in service: until the controller has told this broker its roles, a partition "+
				"without a log here will not be led or kept in-sync by it with an empty log", "dir", d)
			if !slices.Contains(m.ReplacedLogDirs, d) {
				m.ReplacedLogDirs = append(m.ReplacedLogDirs, d)
			}
		} else if slices.Contains(cfg.LogDirsReplaced, d) {
			log.Info("--log.dirs.replaced names a log dir that is in use: nothing to replace", "dir", d)
		}
		format = append(format, d)
	}
	for _, d := range m.LogDirs {
		if !slices.Contains(dirs, d) && !slices.Contains(m.ReplacedLogDirs, d) {
			log.Warn("A log dir was left out of --log.dirs: its partitions' logs are gone from this broker, and it will not "+
				"lead or stay in-sync with an empty log for one until the controller has told it its roles", "dir", d)
			m.ReplacedLogDirs = append(m.ReplacedLogDirs, d)
		}
	}
	// The record is written before a replaced dir is formatted: a start
	// stopped in between must leave it recorded, not a formatted dir the
	// next start takes for an intact one. A new dir is listed only once
	// formatted, so a start stopped before that does not take it for lost.
	if !slices.Equal(m.ReplacedLogDirs, was.ReplacedLogDirs) {
		if err := metaprops.Write(cfg.DataDir, m); err != nil {
			return nil, nil, fmt.Errorf("--data.dir %s: %w", cfg.DataDir, err)
		}
	}
	for _, d := range format {
		if err := vfs.MkdirAllDurable(vfs.OS, d); err != nil {
			return nil, nil, fmt.Errorf("log dir %s: %w", d, err)
		}
		if err := checkBrokerID(d, cfg.ID); err != nil {
			return nil, nil, err
		}
	}
	m.LogDirs = slices.Clone(dirs)
	if !m.Equal(was) {
		if err := metaprops.Write(cfg.DataDir, m); err != nil {
			return nil, nil, fmt.Errorf("--data.dir %s: %w", cfg.DataDir, err)
		}
	}
	return lost, m.ReplacedLogDirs, nil
}

// hasMetaProps reports whether dir holds a meta.properties.
func hasMetaProps(dir string) (bool, error) {
	_, err := os.Stat(dir + "/" + metaprops.FileName)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("log dir %s: %w", dir, err)
	}
}

// lostLogsSettled forgets the replaced log dirs once every role the
// controller gave this broker has its log.
func (b *Broker) lostLogsSettled() {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	m, _, err := metaprops.Read(b.cfg.DataDir)
	if err == nil && len(m.ReplacedLogDirs) > 0 {
		m.ReplacedLogDirs = nil
		err = metaprops.Write(b.cfg.DataDir, m)
	}
	if err != nil {
		b.log.Error("Recording that no log is missing any more failed; the next start will be as careful again", "err", err)
	}
}

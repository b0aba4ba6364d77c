// Package metaprops reads and writes meta.properties, the file in a
// broker's data dir that says whose logs these are: the cluster id and the
// broker id (Kafka's file of the same name and keys). A broker refuses to
// start with a data dir that belongs to another broker or another cluster,
// so a mistyped --broker.id or an --etcd.endpoints pointing at another
// cluster never mixes foreign logs into a cluster.
package metaprops

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FileName is the file's name in the data dir.
const FileName = "meta.properties"

// Meta is what the file holds. ClusterID is empty until the broker has
// learned it (a first start before any controller created it).
type Meta struct {
	ClusterID string
	BrokerID  int32
	// LogDirs (the data dir's file only) are the log dirs this broker has
	// formatted: one of them found later without its own meta.properties
	// is a lost disk (unmounted, or replaced), not a new one.
	LogDirs []string
	// ReplacedLogDirs (the data dir's file only) are formatted dirs that
	// came back empty and were put in service again: until the controller
	// has told the broker every role it has, a partition it finds no log
	// for may have lived there, and it must not lead it or stay in its ISR.
	ReplacedLogDirs []string
}

// Equal reports whether m and o hold the same values.
func (m Meta) Equal(o Meta) bool {
	return m.ClusterID == o.ClusterID && m.BrokerID == o.BrokerID &&
		slices.Equal(m.LogDirs, o.LogDirs) && slices.Equal(m.ReplacedLogDirs, o.ReplacedLogDirs)
}

// Read reads dir's file; found is false when there is none.
func Read(dir string) (m Meta, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, false, nil
	}
	if err != nil {
		return Meta{}, false, err
	}
	sawBroker := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return Meta{}, true, fmt.Errorf("%s line %d: %q is not key=value", FileName, line, l)
		}
		switch strings.TrimSpace(k) {
		case "cluster.id":
			m.ClusterID = strings.TrimSpace(v)
		case "broker.id":
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return Meta{}, true, fmt.Errorf("%s line %d: broker.id %q is not a number", FileName, line, v)
			}
			m.BrokerID, sawBroker = int32(n), true
		case "log.dirs":
			m.LogDirs = splitList(v)
		case "log.dirs.replaced":
			m.ReplacedLogDirs = splitList(v)
		}
	}
	if !sawBroker {
		return Meta{}, true, fmt.Errorf("%s has no broker.id", FileName)
	}
	return m, true, nil
}

// Write replaces dir's file atomically (a temporary file, fsynced, then
// renamed, then the dir fsynced), so a crash leaves the old file or the new
// one.
func Write(dir string, m Meta) error {
	var b strings.Builder
	b.WriteString("# Whose logs these are: a tidemark broker refuses to start on a data dir of another broker or cluster.\n")
	b.WriteString("version=1\n")
	fmt.Fprintf(&b, "broker.id=%d\n", m.BrokerID)
	if m.ClusterID != "" {
		fmt.Fprintf(&b, "cluster.id=%s\n", m.ClusterID)
	}
	if len(m.LogDirs) > 0 {
		fmt.Fprintf(&b, "log.dirs=%s\n", strings.Join(m.LogDirs, ","))
	}
	if len(m.ReplacedLogDirs) > 0 {
		fmt.Fprintf(&b, "log.dirs.replaced=%s\n", strings.Join(m.ReplacedLogDirs, ","))
	}
	path := filepath.Join(dir, FileName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// splitList reads a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

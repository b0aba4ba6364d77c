package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tidemark.io/services/broker/internal/metaprops"
)

// A formatted log dir found empty or missing is lost (kept offline, never
// created again), unless named replaced; a new dir is formatted; a dir
// left out of log.dirs makes the broker careful as a replaced one does.
func TestPrepareLogDirsTellsALostDiskFromANewOne(t *testing.T) {
	data := t.TempDir()
	a, b, c := filepath.Join(data, "a"), filepath.Join(data, "b"), filepath.Join(data, "c")
	cfg := Config{ID: 4, DataDir: data, LogDirs: []string{a, b}}
	lost, replaced, err := prepareLogDirs(cfg, slog.New(slog.DiscardHandler))
	if err != nil || len(lost) != 0 || len(replaced) != 0 {
		t.Fatalf("first start: lost %v, replaced %v, err %v", lost, replaced, err)
	}
	for _, d := range []string{a, b} {
		if m, found, err := metaprops.Read(d); !found || err != nil || m.BrokerID != 4 {
			t.Fatalf("%s not formatted: %+v %v %v", d, m, found, err)
		}
	}

	// b's disk is unmounted: an empty mount point.
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(b, 0o755); err != nil {
		t.Fatal(err)
	}
	lost, replaced, err = prepareLogDirs(cfg, slog.New(slog.DiscardHandler))
	if err != nil || len(replaced) != 0 || lost[b] == nil || !strings.Contains(lost[b].Error(), "--log.dirs.replaced="+b) {
		t.Fatalf("b empty: lost %v, replaced %v, err %v; want b lost, naming the flag", lost, replaced, err)
	}
	if _, found, _ := metaprops.Read(b); found {
		t.Fatal("a lost dir was formatted again")
	}

	// The operator says b was replaced, and adds a new dir c.
	cfg.LogDirs = []string{a, b, c}
	cfg.LogDirsReplaced = []string{b}
	lost, replaced, err = prepareLogDirs(cfg, slog.New(slog.DiscardHandler))
	if err != nil || len(lost) != 0 || !slices.Equal(replaced, []string{b}) {
		t.Fatalf("b replaced: lost %v, replaced %v, err %v", lost, replaced, err)
	}
	// The replaced record lasts across a restart without the flag.
	cfg.LogDirsReplaced = nil
	if _, replaced, err = prepareLogDirs(cfg, slog.New(slog.DiscardHandler)); err != nil || !slices.Equal(replaced, []string{b}) {
		t.Fatalf("restart: replaced %v, err %v; want b still recorded", replaced, err)
	}

	// a is left out of log.dirs: its logs are gone from this broker.
	cfg.LogDirs = []string{b, c}
	if _, replaced, err = prepareLogDirs(cfg, slog.New(slog.DiscardHandler)); err != nil || !slices.Equal(replaced, []string{b, a}) {
		t.Fatalf("a left out: replaced %v, err %v; want b and a", replaced, err)
	}
	m, _, err := metaprops.Read(data)
	if err != nil || !slices.Equal(m.LogDirs, []string{b, c}) || m.BrokerID != 4 {
		t.Fatalf("data dir meta: %+v %v", m, err)
	}
}

// A start that put a replaced dir in service but failed to record it (a
// crash, or the data dir's write failing) must not leave the dir looking
// intact to the next start: the record comes before the dir is formatted.
func TestPrepareLogDirsRecordsAReplacedDirBeforeFormattingIt(t *testing.T) {
	data := t.TempDir()
	a, b := filepath.Join(data, "a"), filepath.Join(data, "b")
	cfg := Config{ID: 4, DataDir: data, LogDirs: []string{a, b}}
	if _, _, err := prepareLogDirs(cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	// The data dir's meta.properties cannot be rewritten this time.
	block := filepath.Join(data, metaprops.FileName+".tmp")
	if err := os.Mkdir(block, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.LogDirsReplaced = []string{b}
	if _, _, err := prepareLogDirs(cfg, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("the data dir's meta.properties could not be written, yet the start went on")
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	for _, flag := range [][]string{{b}, nil} {
		cfg.LogDirsReplaced = flag
		lost, replaced, err := prepareLogDirs(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(replaced, b) && lost[b] == nil {
			t.Fatalf("restart with --log.dirs.replaced=%v after a failed start: lost %v, replaced %v; "+
				"b's logs are gone, yet it is taken for an intact dir", flag, lost, replaced)
		}
	}
}

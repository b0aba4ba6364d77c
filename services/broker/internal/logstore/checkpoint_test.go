package logstore

import (
	"errors"
	"strings"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

func TestOffsetCheckpointRoundTrip(t *testing.T) {
	fsys := newMem(t)
	in := map[TopicPartition]int64{{"a", 0}: 5, {"a", 1}: 0, {"b-c.d_e", 12}: 1 << 40}
	if err := WriteOffsetCheckpoint(fsys, "/data", hwCheckpointFile, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadOffsetCheckpoint(fsys, "/data", hwCheckpointFile)
	if err != nil || len(out) != len(in) {
		t.Fatalf("read %v, %v", out, err)
	}
	for tp, off := range in {
		if out[tp] != off {
			t.Fatalf("%s: %d, want %d", tp, out[tp], off)
		}
	}
	data, _ := vfs.ReadFile(fsys, "/data/"+hwCheckpointFile)
	if !strings.HasPrefix(string(data), "0\n3\na 0 5\n") {
		t.Fatalf("file layout:\n%s", data)
	}
	missing, err := ReadOffsetCheckpoint(fsys, "/data", "nope")
	if err != nil || len(missing) != 0 {
		t.Fatalf("missing file: %v, %v", missing, err)
	}
}

func TestCorruptCheckpoints(t *testing.T) {
	cases := []struct {
		name, body string
		line       int
	}{
		{"empty", "", 0},
		{"bad version", "1\n0\n", 1},
		{"bad count", "0\nx\n", 2},
		{"missing entries", "0\n2\nt 0 1\n", 3},
		{"too few fields", "0\n1\nt 0\n", 3},
		{"bad offset", "0\n1\nt 0 1x\n", 3},
		{"bad partition", "0\n1\nt -1 1\n", 3},
		{"negative offset", "0\n1\nt 0 -5\n", 3},
		{"duplicate", "0\n2\nt 0 1\nt 0 2\n", 4},
		{"extra line", "0\n1\nt 0 1\nt 1 2\n", 4},
		{"binary junk", "0\n1\n\x00\xff\x01\n", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := newMem(t)
			f, _ := fsys.Create("/data/cp")
			f.WriteAt([]byte(c.body), 0)
			f.Close()
			_, err := ReadOffsetCheckpoint(fsys, "/data", "cp")
			var ce *CheckpointError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a CheckpointError", err)
			}
			if ce.File != "/data/cp" || ce.Line != c.line || !strings.Contains(err.Error(), "/data/cp") {
				t.Fatalf("error %q: file %s line %d, want line %d", err, ce.File, ce.Line, c.line)
			}
		})
	}
}

func TestEpochCheckpointRoundTripAndCorruption(t *testing.T) {
	fsys := newMem(t)
	fsys.MkdirAll(testDir)
	want := []EpochEntry{{0, 0}, {2, 100}, {5, 100}, {9, 4000}}
	if err := writeEpochCheckpoint(fsys, testDir, want); err != nil {
		t.Fatal(err)
	}
	got, found, err := readEpochCheckpoint(fsys, testDir)
	if err != nil || !found || !equalEntries(got, want) {
		t.Fatalf("got %v %v %v", got, found, err)
	}
	for _, body := range []string{"0\n2\n5 10\n4 20\n", "0\n2\n1 10\n2 5\n", "0\n1\n1\n", "0\n1\n-1 0\n"} {
		f, _ := fsys.Create(testDir + "/" + epochCheckpointFile)
		f.WriteAt([]byte(body), 0)
		f.Close()
		_, _, err := readEpochCheckpoint(fsys, testDir)
		var ce *CheckpointError
		if !errors.As(err, &ce) || ce.Line < 3 {
			t.Fatalf("body %q: %v", body, err)
		}
	}
}

func TestOpenFailsOnCorruptEpochCheckpoint(t *testing.T) {
	fsys := newMem(t)
	l, err := Open(Options{FS: fsys, Dir: testDir, Config: smallConfig()})
	if err != nil {
		t.Fatal(err)
	}
	appendLeader(t, l, plain(1, 1, 1), 0)
	l.Close()
	f, _ := fsys.Create(testDir + "/" + epochCheckpointFile)
	f.WriteAt([]byte("0\n1\nnot numbers\n"), 0)
	f.Close()
	_, err = Open(Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	if kerr.CodeOf(err) != kerr.KafkaStorageError || !strings.Contains(err.Error(), epochCheckpointFile+":3") {
		t.Fatalf("Open with a corrupt epoch checkpoint: %v", err)
	}
}

func TestMissingEpochCheckpointIsRebuilt(t *testing.T) {
	fsys := newMem(t)
	l, _ := Open(Options{FS: fsys, Dir: testDir, Config: smallConfig()})
	appendLeader(t, l, plain(2, 1, 1), 1)
	appendLeader(t, l, plain(2, 1, 1), 1)
	appendLeader(t, l, plain(2, 1, 1), 4)
	want := l.EpochEntries()
	l.Close()
	fsys.Remove(testDir + "/" + epochCheckpointFile)
	r := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), CleanShutdown: true})
	if got := r.EpochEntries(); !equalEntries(got, want) || !equalEntries(got, []EpochEntry{{1, 0}, {4, 4}}) {
		t.Fatalf("rebuilt %v, want %v", got, want)
	}
}

package metaprops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteThenRead(t *testing.T) {
	dir := t.TempDir()
	if _, found, err := Read(dir); found || err != nil {
		t.Fatalf("empty dir: found %v, err %v", found, err)
	}
	for _, m := range []Meta{{BrokerID: 3}, {BrokerID: 3, ClusterID: "q1Sh-9_nRfe7aC4TL3u8Rw"},
		{BrokerID: 3, ClusterID: "c", LogDirs: []string{"/d1", "/d2"}, ReplacedLogDirs: []string{"/d2"}}} {
		if err := Write(dir, m); err != nil {
			t.Fatal(err)
		}
		got, found, err := Read(dir)
		if err != nil || !found || !got.Equal(m) {
			t.Fatalf("read back %+v, found %v, err %v; want %+v", got, found, err, m)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".tmp")); err == nil {
		t.Fatal("the temporary file was left behind")
	}
}

func TestReadNamesWhatIsWrong(t *testing.T) {
	for body, want := range map[string]string{
		"version=1\ncluster.id=x\n":   "no broker.id",
		"broker.id=two\n":             "not a number",
		"version=1\nnonsense\n":       "line 2",
		"# comment\n\nbroker.id=1\n ": "",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := Read(dir)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", body, err, want)
		}
	}
}

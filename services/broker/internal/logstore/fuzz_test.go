package logstore

import (
	"bytes"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// fuzzLog writes a clean three-segment log and returns its file system,
// the last segment's path, and every batch by base offset.
func fuzzLog(t *testing.T) (*vfs.MemFS, string, map[int64][]byte, int64) {
	mem := vfs.NewMem()
	cfg := smallConfig()
	l, err := Open(Options{FS: mem, Dir: testDir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		if _, err := l.AppendAsLeader(plain(1+i%3, 60, int64(i)).build(), int32(i/8)); err != nil {
			t.Fatal(err)
		}
	}
	orig := map[int64][]byte{}
	res, err := l.Read(l.segments()[len(l.segments())-1].base, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	for b := range recordbatch.All(res.Records) {
		orig[b.BaseOffset()] = bytes.Clone(b)
	}
	last := l.active().logPath
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, last, orig, leo
}

// FuzzRecoverTail overwrites the tail of a valid log's last segment with
// arbitrary bytes, starting back bytes before its end, as a crash can leave
// it; opened as after a clean shutdown, the bytes are only appended (the
// clean path trusts what Close left and checks the tail beyond the last
// index entry). Opening must not fail or panic, and what it reads back must
// be whole, valid, contiguous batches that match the original wherever the
// bytes were not touched.
func FuzzRecoverTail(f *testing.F) {
	f.Add(uint16(0), []byte{}, false)
	f.Add(uint16(0), []byte("garbage after the last batch"), false)
	f.Add(uint16(5), []byte{0, 0, 0, 0}, true)
	f.Add(uint16(300), bytes.Repeat([]byte{0}, 512), false)
	f.Add(uint16(0), plain(2, 10, 1).build(), true)
	f.Fuzz(func(t *testing.T, back uint16, tail []byte, clean bool) {
		mem, path, orig, leo := fuzzLog(t)
		data, err := vfs.ReadFile(mem, path)
		if err != nil {
			t.Fatal(err)
		}
		at := max(len(data)-int(back), 0)
		if clean {
			at = len(data)
		}
		edited := append(bytes.Clone(data[:at]), tail...)
		if at+len(tail) < len(data) {
			edited = append(edited, data[at+len(tail):]...)
		}
		file, _ := mem.Create(path)
		file.WriteAt(edited, 0)
		file.Close()

		l, err := Open(Options{FS: mem, Dir: testDir, Config: smallConfig(), CleanShutdown: clean})
		if err != nil {
			t.Fatalf("Open after tail damage: %v", err)
		}
		defer l.Close()
		got := readAll(t, l, 0, l.LogEndOffset(), 1<<20)
		for _, b := range got {
			want, ok := orig[b.BaseOffset()]
			pos := int64(bytes.Index(edited, b))
			if ok && pos >= 0 && pos+int64(len(b)) <= int64(at) && !bytes.Equal(b, want) {
				t.Fatalf("untouched batch at %d changed", b.BaseOffset())
			}
		}
		if l.LogEndOffset() < leo && len(tail) == 0 && back == 0 {
			t.Fatalf("an undamaged log lost data: LEO %d, was %d", l.LogEndOffset(), leo)
		}
		// The recovered log must take appends.
		if _, err := l.AppendAsLeader(plain(1, 1, 1).build(), 10); err != nil {
			t.Fatal(err)
		}
	})
}

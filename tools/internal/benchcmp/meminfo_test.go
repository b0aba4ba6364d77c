package benchcmp

import (
	"strings"
	"testing"
)

func TestParseMemoryReadsFreeAndPageCache(t *testing.T) {
	m, err := parseMemory(strings.NewReader("MemTotal:       24567890 kB\nMemFree:         1048576 kB\nMemAvailable:   20000000 kB\nBuffers:            1234 kB\nCached:          2097152 kB\nSwapCached:            0 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Free != 1<<30 || m.PageCache != 2<<30 {
		t.Fatalf("got %+v, want 1 GiB free and 2 GiB cached (not SwapCached)", m)
	}
	for _, bad := range []string{"MemTotal: 1 kB\n", "MemFree: x kB\nCached: 1 kB\n"} {
		if _, err := parseMemory(strings.NewReader(bad)); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
	if m, err := readMemory(); err != nil || m.Free <= 0 || m.PageCache < 0 {
		t.Fatalf("this machine's /proc/meminfo: %+v, %v", m, err)
	}
}

// Every row carries the machine's memory when it began, and the report
// names it for the paced rows of both systems.
func TestRowsCarryTheMemoryTheyBeganWith(t *testing.T) {
	shapes := []Shape{
		{Name: "batch-1k", Mode: Batch, Size: 1024, Records: 100},
		{Name: "paced-1k", Mode: Paced, Size: 1024, PaceOf: "batch-1k", Fraction: 0.5, Seconds: 1},
	}
	res := &Result{}
	for _, s := range shapes {
		res.Rows = append(res.Rows, Row{Shape: s})
	}
	measureTidemark(t, res, &fakeSide{rate: map[string]float64{"batch-1k": 3000, "paced-1k": 1500}})
	for _, row := range res.Rows {
		if m := row.Tidemark.Memory; m == nil || m.Free <= 0 {
			t.Fatalf("%s: memory %+v", row.Shape.Name, m)
		}
	}
	res.Rows[1].Tidemark.Memory = &Memory{Free: 2.5e9, PageCache: 14e9}
	res.Rows[1].JetStream.Memory = &Memory{Free: 0.2e9, PageCache: 20e9}
	note := res.memoryNote()
	for _, want := range []string{"tidemark, " + shapes[1].Label() + ": 2.5 GB free, 14.0 GB page cache", "JetStream, " + shapes[1].Label() + ": 0.2 GB free, 20.0 GB page cache"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q:\n%s", want, note)
		}
	}
	if strings.Contains(note, shapes[0].Label()+":") {
		t.Errorf("a row that is not paced named:\n%s", note)
	}
	if !strings.Contains(res.Markdown(), note) {
		t.Error("the report leaves the note out")
	}
}

package benchcmp

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Memory is the machine's memory as /proc/meminfo has it when a row
// began. Its free part matters to the rows that write: on a virtual machine
// that hands free memory back to its host (free page reporting), a page new
// to the page cache costs many times what a cached one does, and the paced
// 1 KiB row's tail moved with it ("What an append costs here").
type Memory struct {
	Free      int64 `json:"free"`       // MemFree, bytes
	PageCache int64 `json:"page_cache"` // Cached, bytes
}

// readMemory reads /proc/meminfo.
func readMemory() (Memory, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	return parseMemory(f)
}

// parseMemory reads MemFree and Cached (kB) out of meminfo's text.
func parseMemory(r io.Reader) (Memory, error) {
	var m Memory
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		var into *int64
		switch name {
		case "MemFree":
			into = &m.Free
		case "Cached":
			into = &m.PageCache
		}
		if !ok || into == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("meminfo %s: %v", name, err)
		}
		*into = kb << 10
		found++
	}
	if err := sc.Err(); err != nil {
		return Memory{}, err
	}
	if found != 2 {
		return Memory{}, fmt.Errorf("meminfo: MemFree or Cached missing")
	}
	return m, nil
}

// memoryNote names the machine's free memory and page cache when each
// paced row of either system began; "" when none was read.
func (r *Result) memoryNote() string {
	var parts []string
	for _, row := range r.Rows {
		if !row.Shape.paced() {
			continue
		}
		for _, side := range []struct {
			name string
			f    Figure
		}{{"tidemark", row.Tidemark}, {"JetStream", row.JetStream}} {
			if m := side.f.Memory; m != nil {
				parts = append(parts, fmt.Sprintf("%s, %s: %.1f GB free, %.1f GB page cache", side.name, row.Shape.Label(), float64(m.Free)/1e9, float64(m.PageCache)/1e9))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "\nThe machine's memory when each paced row began (free memory is where pages new to the page cache come from; see \"What an append costs here\"): " + strings.Join(parts, "; ") + ".\n"
}

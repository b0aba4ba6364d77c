package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tidemark.io/services/broker/internal/logstore"
)

// TestFileCacheMetrics: the collector reports the cache's real state, here
// three logs' files through a cache of two handles.
func TestFileCacheMetrics(t *testing.T) {
	files := logstore.NewFileCache(2)
	dir := t.TempDir()
	for i := range 3 {
		l, err := logstore.Open(logstore.Options{Files: files, Dir: fmt.Sprintf("%s/t-%d", dir, i), Config: logstore.DefaultConfig()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	st := files.Stats()
	if st.Open != 2 || st.Evictions < 7 {
		t.Fatalf("cache %+v: want 2 open and the other 7 files evicted", st)
	}
	want := fmt.Sprintf(`
# HELP tidemark_log_open_files Segment files (.log, .index, .timeindex) the broker holds open.
# TYPE tidemark_log_open_files gauge
tidemark_log_open_files 2
# HELP tidemark_log_max_open_files log.max.open.files: the bound on open segment files (exceeded only by files in use).
# TYPE tidemark_log_max_open_files gauge
tidemark_log_max_open_files 2
# HELP tidemark_log_file_cache_evictions_total Idle segment files closed to stay within log.max.open.files.
# TYPE tidemark_log_file_cache_evictions_total counter
tidemark_log_file_cache_evictions_total %d
`, st.Evictions)
	err := testutil.CollectAndCompare(fileCacheCollector{files: files, max: 2}, strings.NewReader(want),
		"tidemark_log_open_files", "tidemark_log_max_open_files", "tidemark_log_file_cache_evictions_total")
	if err != nil {
		t.Fatal(err)
	}
}

package config

import (
	"flag"
	"fmt"
	"strconv"
	"time"
)

// DurationMs registers a duration flag in whole milliseconds, the one
// convention for durations in every binary: settings Kafka has keep
// Kafka's name and unit (replica.lag.time.max.ms, ...), and tidemark's own
// durations follow the same `.ms` form, so no flag takes "6s" and another
// 6000. name should end in ".ms".
func DurationMs(fs *flag.FlagSet, d *time.Duration, name, usage string) {
	fs.Func(name, usage+" (ms, default "+strconv.FormatInt(d.Milliseconds(), 10)+")", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not a whole number of milliseconds: %q", s)
		}
		if n < 0 {
			return fmt.Errorf("must not be negative: %d", n)
		}
		*d = time.Duration(n) * time.Millisecond
		return nil
	})
}

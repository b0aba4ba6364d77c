package topicconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRateOverrides parses per-principal byte rates written as
// "principal:bytesPerSecond" pairs separated by commas, e.g.
// "alice:1048576,ANONYMOUS:65536". The principal is the name identity gives
// (a certificate's common name, or ANONYMOUS); the rate must be >= 1.
func ParseRateOverrides(s string) (map[string]int64, error) {
	out := map[string]int64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		i := strings.LastIndexByte(pair, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q is not principal:bytesPerSecond", pair)
		}
		name, rate := strings.TrimSpace(pair[:i]), strings.TrimSpace(pair[i+1:])
		n, err := strconv.ParseInt(rate, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("rate %q of %s is not a whole number of bytes per second >= 1", rate, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("principal %s is listed twice", name)
		}
		out[name] = n
	}
	return out, nil
}

func checkRateOverrides(s string) error {
	_, err := ParseRateOverrides(s)
	return err
}

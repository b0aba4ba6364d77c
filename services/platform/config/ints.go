package config

import (
	"fmt"
	"strconv"
)

// ParseInt32 parses s into *dst, for flag.Func setters of int32 settings.
func ParseInt32(s string, dst *int32) error {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return fmt.Errorf("not a 32-bit integer: %q", s)
	}
	*dst = int32(v)
	return nil
}

// Package config loads a service's settings in one order everywhere:
// defaults, then TIDEMARK_* environment variables, then command-line flags;
// then the service validates the result and names the flag that is wrong.
//
// Every flag has an environment twin derived from its name, so the compose
// file and the command line speak the same names: --broker.id is
// TIDEMARK_BROKER_ID, --replica.lag.time.max.ms is
// TIDEMARK_REPLICA_LAG_TIME_MAX_MS.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// EnvPrefix is prepended to every derived environment variable name.
const EnvPrefix = "TIDEMARK_"

// EnvName derives the environment variable for a flag name.
func EnvName(flagName string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return EnvPrefix + strings.ToUpper(r.Replace(flagName))
}

// Error says which setting was wrong and why, in the user's terms.
type Error struct {
	Flag   string
	Value  string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid value %q for --%s (%s): %s", e.Value, e.Flag, EnvName(e.Flag), e.Reason)
}

// Invalid builds an *Error for a flag; Validate functions return it.
func Invalid(flagName string, value any, format string, args ...any) error {
	return &Error{Flag: flagName, Value: fmt.Sprint(value), Reason: fmt.Sprintf(format, args...)}
}

// Parse applies environment variables for every flag in fs, then parses args
// on top of them (flags win over env). An unparsable environment value is an
// error naming both the variable and the flag.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(EnvName(f.Name))
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, &Error{Flag: f.Name, Value: v, Reason: "from the environment: " + err.Error()})
		}
	})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return fs.Parse(args)
}

// Usage prints the flags of fs with their environment twins, sorted.
func Usage(fs *flag.FlagSet, name string) func() {
	return func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage of %s:\n", name)
		var lines []string
		fs.VisitAll(func(f *flag.Flag) {
			lines = append(lines, fmt.Sprintf("  --%s (env %s, default %q)\n      %s\n", f.Name, EnvName(f.Name), f.DefValue, f.Usage))
		})
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprint(out, l)
		}
	}
}

// StringList is a comma-separated flag value, e.g. etcd endpoints.
type StringList []string

func (l *StringList) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the comma-separated items of v.
func (l *StringList) Set(v string) error {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	*l = out
	return nil
}

// Type names the value in pflag's help (the CLI registers Go flags there).
func (l *StringList) Type() string { return "strings" }

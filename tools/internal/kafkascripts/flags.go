package kafkascripts

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// usageError is a refusal Kafka's scripts print with their usage
// (CommandLineUtils.printUsageAndExit): the message, then the options, on
// stderr, exit 1.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parseKafkaFlags parses args as Kafka's scripts' option parser would,
// turning pflag's complaints into jopt-simple's wording.
func parseKafkaFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return err
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		return fmt.Errorf("%s is not a recognized option", strings.TrimPrefix(msg, "unknown flag: --"))
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		name, _, _ := strings.Cut(strings.TrimPrefix(msg, "unknown shorthand flag: '"), "'")
		return fmt.Errorf("%s is not a recognized option", name)
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-'")
		name, _, _ = strings.Cut(name, "'")
		return fmt.Errorf("Option %s requires an argument", name)
	}
	return err
}

// requireOption is jopt-simple's complaint about a missing option.
func requireOption(fs *pflag.FlagSet, name string) error {
	if !fs.Changed(name) {
		return usageError{fmt.Sprintf("Missing required argument \"[%s]\"", name)}
	}
	return nil
}

// refuseWith is CommandLineUtils.checkInvalidArgs: used, when given, may
// not come with any of others.
func refuseWith(fs *pflag.FlagSet, used string, others ...string) error {
	if !fs.Changed(used) {
		return nil
	}
	for _, o := range others {
		if fs.Changed(o) {
			return usageError{fmt.Sprintf("Option \"[%s]\" can't be used with option \"[%s]\"", used, o)}
		}
	}
	return nil
}

// parseOutcome answers what a script's flag parsing returned, as Kafka's
// scripts do: --help prints about and the usage on stdout (exit 0); a
// usageError its message and the usage on stderr (exit 1); another error
// the line errLine makes of it (nil: its text) on stderr (exit 1). done is
// false when parsing succeeded and the script goes on.
func parseOutcome(err error, about string, usage func() string, stdout, stderr io.Writer, errLine func(error) string) (code int, done bool) {
	var refusal usageError
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprintln(stdout, about)
		fmt.Fprint(stdout, usage())
		return 0, true
	case errors.As(err, &refusal):
		fmt.Fprintln(stderr, refusal.msg)
		fmt.Fprint(stderr, usage())
		return 1, true
	case errLine != nil:
		fmt.Fprintln(stderr, errLine(err))
	default:
		fmt.Fprintln(stderr, err)
	}
	return 1, true
}

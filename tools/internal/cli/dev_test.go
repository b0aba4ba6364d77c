package cli_test

import (
	"flag"
	"io"
	"regexp"
	"testing"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

// Every --broker-arg example in `tidemark dev up --help` must be accepted by
// the broker's own flag parser and config validation: a wrong example sends
// users to a broker that refuses to start.
func TestDevUpBrokerArgExamplesParse(t *testing.T) {
	r := runCLI(t, "", "dev", "up", "--help").ok(t)
	examples := regexp.MustCompile(`--broker-arg=(\S+)`).FindAllStringSubmatch(r.out, -1)
	if len(examples) == 0 {
		t.Fatalf("no --broker-arg example in the help text:\n%s", r.out)
	}
	for _, ex := range examples {
		arg := ex[1]
		cfg := broker.DefaultConfig()
		cfg.TLS = tlsconf.Plain()
		fs := flag.NewFlagSet("broker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.AddFlags(fs)
		if err := config.Parse(fs, []string{arg}, func(string) string { return "" }); err != nil {
			t.Errorf("help example --broker-arg=%s: the broker refuses it: %v", arg, err)
			continue
		}
		if fs.NArg() != 0 {
			t.Errorf("help example --broker-arg=%s: the broker leaves %q unparsed", arg, fs.Args())
			continue
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("help example --broker-arg=%s: the broker's config check refuses it: %v", arg, err)
		}
	}
}

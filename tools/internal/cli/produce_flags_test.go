package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestProducerFlagsBoundTheBatchingProducer(t *testing.T) {
	parse := func(args ...string) (*producerFlags, *cobra.Command) {
		t.Helper()
		var pf producerFlags
		cmd := &cobra.Command{}
		pf.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return &pf, cmd
	}
	pf, cmd := parse("--buffer-memory", "262144", "--max-in-flight", "3")
	o, err := pf.options(cmd)
	if err != nil || o.BufferMemory != 262144 || o.MaxInFlight != 3 {
		t.Fatalf("options %+v, %v: want buffer.memory 262144, max.in.flight 3", o, err)
	}
	pf, cmd = parse()
	if o, err := pf.options(cmd); err != nil || o.MaxInFlight != 0 || o.BufferMemory != 32<<20 {
		t.Fatalf("defaults %+v, %v: want the client's max.in.flight (0 here) and 32 MiB", o, err)
	}
	for _, bad := range [][]string{{"--buffer-memory", "0"}, {"--max-in-flight", "0"}} {
		pf, cmd := parse(bad...)
		_, err := pf.options(cmd)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want a usage error naming the flag", bad, err)
		}
	}
}

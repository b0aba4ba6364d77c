package kafkascripts

import (
	"bytes"
	"strings"
	"testing"
)

// Every script answers --help with its usage on stdout (exit 0) and an
// option it does not know with jopt-simple's line on stderr (exit 1), as
// Kafka's scripts do, before dialling anything.
func TestEveryScriptAnswersHelpAndUnknownOptions(t *testing.T) {
	for _, name := range Names() {
		run := Lookup(name)
		var out, errOut bytes.Buffer
		if code := run([]string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "--bootstrap-server") {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", name, code, out.String(), errOut.String())
		}
		out.Reset()
		errOut.Reset()
		if code := run([]string{"--no-such-option"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no-such-option is not a recognized option") {
			t.Errorf("%s --no-such-option: exit %d, stdout %q, stderr %q; want exit 1 and jopt-simple's line on stderr", name, code, out.String(), errOut.String())
		}
	}
}

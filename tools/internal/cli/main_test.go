package cli_test

import (
	"os"
	"testing"

	"tidemark.io/tools/internal/cli"
)

// launcherEnv makes the test binary run the CLI itself (cli.Main with its
// arguments), so a test can signal a `tidemark dev up` process built from
// this checkout.
const launcherEnv = "TIDEMARK_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(launcherEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

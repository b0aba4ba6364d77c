// Command tidemark is the operator's tool for a tidemark cluster, modelled on
// Kafka's command-line tools.
package main

import (
	"os"

	"tidemark.io/tools/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}

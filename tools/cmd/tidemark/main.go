// Command tidemark is the operator's tool for a tidemark cluster, modelled on
// Kafka's command-line tools. Run under the name of one of Kafka's scripts
// (the image links /opt/kafka/bin/kafka-topics.sh and the others to it,
// `make build` bin/kafka-topics.sh and the others), it is that script
// instead (tools/internal/kafkascripts).
package main

import (
	"os"

	"tidemark.io/tools/internal/cli"
	"tidemark.io/tools/internal/kafkascripts"
)

func main() {
	if script := kafkascripts.Lookup(os.Args[0]); script != nil {
		os.Exit(script(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}

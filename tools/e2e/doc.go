// Package e2e plays tidemark's failure playbooks against real containers:
// the docker compose stack in deploy/ (etcd, two controllers, three brokers,
// the gateway and Jaeger), started under a compose project of its own,
// tidemark-e2e, so that a stack started with `make up` is never touched.
//
// The tests are skipped unless TIDEMARK_E2E=1, so `go test ./...` stays
// fast. `make e2e` builds the binaries and images, sets the variable and runs
// them; `make test` calls it when a Docker engine answers.
//
// TestMain removes whatever an earlier run left behind (`down -v
// --remove-orphans`), starts the stack with its own host ports (brokers on
// 19092-19094, their Kafka listeners on 28092-28094 (SSL) and 28192-28194
// (SASL_SSL), controllers on 19190-19191, the gateway on 18080, Jaeger on
// 26686 and 14317) and a short replica.lag.time.max.ms, waits until it is
// healthy, runs the tests in order and takes the stack down again, also when
// a test fails. Brokers advertise broker-N:<port>, the name their containers
// have on the compose network; on the host the tests' gRPC dialer sends those
// names to 127.0.0.1, where each broker is published on the same port.
//
// The stack runs as deploy/compose.yml defines it: mutual TLS on every
// gRPC link, etcd with client certificates and roles, HTTPS and tokens on
// the gateway, every container as user 65532. After it is healthy the
// harness copies the pki volume out of the exited pki container, and the
// tests' clients present its admin certificate; security_test.go checks the
// refusals and the processes' users on the running stack, and
// sasl_test.go the brokers' SASL_SSL listener: SCRAM users, ACLs made with
// kafka-acls.sh, a franz-go client on the host logging in with a password,
// and Kafka's scripts run inside a broker's container.
//
// TestNoteLabPythonDemos starts a second project beside it, the learning
// note's lab (deploy/note, project tidemark-e2e-note, Kafka ports
// 27092/27094/27096), runs testdata/note_lab_demos.py against it with
// Debian's python3-confluent-kafka and removes it again;
// TestNoteLabInNetworkClient starts it too and checks that a client inside
// its network, bootstrapping kafka1:19092, is told the brokers' INTERNAL
// addresses and produces and consumes through them.
//
// quiet_test.go restarts, pauses and moves containers while nothing is
// produced. Docker gives a container its old address back when it is free,
// so to move a broker to another one an idle container,
// <project>-address-holder, takes the old one meanwhile; it is removed when
// the test ends.
//
// Every test brings back what it broke (containers stopped or cut off) when
// it ends, prints a timeline of what it saw, and bounds every wait.
//
// Environment: TIDEMARK_E2E_COMPOSE names the compose command ("docker
// compose" or "docker-compose"; found when unset), COMPOSE_FILE the compose
// files (deploy/compose.yml when unset), TIDEMARK_IMAGE, ETCD_IMAGE and
// JAEGER_IMAGE the images, TIDEMARK_E2E_LOG_DIR where the containers'
// logs and the timelines are saved at the end, TIDEMARK_E2E_PROJECT another
// compose project name, and TIDEMARK_E2E_PLAINTEXT=1 runs the stack with
// deploy/compose.plaintext.yml (the security tests then skip, saying so).
package e2e

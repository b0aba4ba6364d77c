package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
)

// project is the compose project of the end-to-end stack. `make up` uses
// "tidemark"; nothing here ever names that one. TIDEMARK_E2E_PROJECT picks
// another (two checkouts on one engine; the ports stay the same).
var project = cmp.Or(os.Getenv("TIDEMARK_E2E_PROJECT"), "tidemark-e2e")

// Host ports of the stack under test: each is the default plus 10000 (Jaeger's
// UI 16686 becomes 26686), so the tier runs beside `make up` and `make run`,
// but the Kafka listeners' (29092.., 29192..), which move down 1000 instead:
// up 10000 they lay in the kernel's ephemeral port range (32768-60999),
// where any connection's local port could hold one as the stack started
// ("bind: address already in use").
// Brokers and controllers listen on these ports inside their containers as
// well, since the port is part of the address they advertise.
var stackPorts = map[string]string{
	"BROKER_1_PORT": "19092", "BROKER_2_PORT": "19093", "BROKER_3_PORT": "19094",
	"CONTROLLER_1_PORT": "19190", "CONTROLLER_2_PORT": "19191",
	"BROKER_1_METRICS_PORT": "19292", "BROKER_2_METRICS_PORT": "19293", "BROKER_3_METRICS_PORT": "19294",
	"CONTROLLER_1_METRICS_PORT": "19390", "CONTROLLER_2_METRICS_PORT": "19391",
	"BROKER_1_KAFKA_PORT": "28092", "BROKER_2_KAFKA_PORT": "28093", "BROKER_3_KAFKA_PORT": "28094",
	"BROKER_1_KAFKA_SASL_PORT": "28192", "BROKER_2_KAFKA_SASL_PORT": "28193", "BROKER_3_KAFKA_SASL_PORT": "28194",
	"GATEWAY_PORT": "18080", "GATEWAY_METRICS_PORT": "19490", "ETCD_PORT": "12379",
	"JAEGER_UI_PORT": "26686", "JAEGER_OTLP_PORT": "14317",
}

// Protocol settings of the stack under test.
const (
	// lagTime is replica.lag.time.max.ms: short, so a cut-off follower
	// leaves the ISR within seconds.
	lagTime = 5 * time.Second
	// sessionTimeoutMs is the brokers' registration lease. It is longer than
	// lagTime so that a silent follower leaves the ISR through the leader's
	// lag check (playbook 2), not through its lease expiring first.
	sessionTimeoutMs = "15000"
)

var (
	brokerAddrs     = []string{"broker-1:19092", "broker-2:19093", "broker-3:19094"}
	controllerAddrs = []string{"controller-1:19190", "controller-2:19191"}
	jaegerURL       = "http://127.0.0.1:26686"
	services        = []string{"etcd", "jaeger", "controller-1", "controller-2", "broker-1", "broker-2", "broker-3", "gateway"}
	// oneShots run once before the others and exit: pki writes the
	// certificates, etcd-init turns etcd's auth on.
	oneShots = []string{"pki", "etcd-init"}
)

// stack is the running compose project.
type stack struct {
	compose []string // "docker compose" or "docker-compose", split
	env     []string
	logDir  string
	// secure: the stack runs with TLS and authentication (the default);
	// TIDEMARK_E2E_PLAINTEXT=1 runs it with compose.plaintext.yml.
	secure bool
	// pkiDir is a copy of the stack's pki volume (CA, certificates, REST
	// tokens) on the host, for the tests' clients.
	pkiDir string

	mu      sync.Mutex
	ids     map[string]string // service -> container id
	network string            // the compose network's name
	downed  bool
}

// st is the stack TestMain started; nil when the tier is off.
var st *stack

func TestMain(m *testing.M) {
	if os.Getenv("TIDEMARK_E2E") != "1" {
		os.Exit(m.Run()) // every test skips
	}
	s, err := newStack()
	if err == nil {
		err = s.start()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: the stack did not come up: %v\n", err)
		if s != nil {
			s.saveLogs()
			s.down()
		}
		os.Exit(1)
	}
	st = s

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "e2e: %v: taking the stack down\n", sig)
		s.down()
		os.Exit(2)
	}()

	code := m.Run()
	s.saveLogs()
	s.down()
	os.Exit(code)
}

// need returns the stack, or skips the test when the tier is off.
func need(t *testing.T) *stack {
	t.Helper()
	if st == nil {
		testenv.Skip(t, "opt-in: the end-to-end tier runs with TIDEMARK_E2E=1 (make e2e; make test runs it when Docker answers)")
	}
	return st
}

func newStack() (*stack, error) {
	s := &stack{ids: map[string]string{}, secure: os.Getenv("TIDEMARK_E2E_PLAINTEXT") != "1"}
	if c := strings.Fields(os.Getenv("TIDEMARK_E2E_COMPOSE")); len(c) > 0 {
		s.compose = c
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		s.compose = []string{"docker", "compose"}
	} else if _, err := exec.LookPath("docker-compose"); err == nil {
		s.compose = []string{"docker-compose"}
	} else {
		return nil, errors.New("neither 'docker compose' nor 'docker-compose' is installed")
	}
	env := os.Environ()
	if os.Getenv("COMPOSE_FILE") == "" {
		dir, err := filepath.Abs(filepath.Join("..", "..", "deploy"))
		if err != nil {
			return nil, err
		}
		files := filepath.Join(dir, "compose.yml")
		if !s.secure {
			files += string(filepath.ListSeparator) + filepath.Join(dir, "compose.plaintext.yml")
		}
		env = append(env, "COMPOSE_FILE="+files)
	}
	for k, v := range stackPorts {
		env = append(env, k+"="+v)
	}
	env = append(env,
		"PUBLISH_ADDRESS=127.0.0.1",
		fmt.Sprintf("REPLICA_LAG_TIME_MAX_MS=%d", lagTime.Milliseconds()),
		"BROKER_SESSION_TIMEOUT_MS="+sessionTimeoutMs,
		"COMPOSE_PROJECT_NAME="+project)
	s.env = env
	s.logDir = os.Getenv("TIDEMARK_E2E_LOG_DIR")
	if s.logDir != "" {
		// Only the files this tier writes there.
		_ = os.Remove(filepath.Join(s.logDir, "timelines.txt"))
		for _, svc := range services {
			_ = os.Remove(filepath.Join(s.logDir, svc+".log"))
		}
	}
	return s, nil
}

// run runs a command bounded by timeout and returns its combined output.
func (s *stack) run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.env
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: no answer within %v", name, strings.Join(args, " "), timeout)
	} else if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return strings.TrimSpace(out.String()), err
}

// composeCmd runs the compose command on the e2e project.
func (s *stack) composeCmd(timeout time.Duration, args ...string) (string, error) {
	full := append(append(slices.Clone(s.compose[1:]), "-p", project), args...)
	return s.run(timeout, s.compose[0], full...)
}

func (s *stack) docker(timeout time.Duration, args ...string) (string, error) {
	return s.run(timeout, "docker", args...)
}

// start removes what an earlier run left, starts the stack and waits until
// every container is healthy and the cluster answers.
func (s *stack) start() error {
	begin := time.Now()
	if _, err := s.docker(20*time.Second, "info"); err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	fmt.Printf("e2e: compose %q, project %s\n", strings.Join(s.compose, " "), project)
	if _, err := s.composeCmd(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
		return fmt.Errorf("removing an earlier run: %w", err)
	}
	if out, err := s.composeCmd(4*time.Minute, "up", "-d", "--remove-orphans"); err != nil {
		return fmt.Errorf("up: %w\n%s", err, out)
	}
	if err := s.discover(); err != nil {
		return err
	}
	if err := s.waitHealthy(services, 2*time.Minute); err != nil {
		return err
	}
	if err := s.copyPKI(); err != nil {
		return err
	}
	mode := "TLS and authentication on"
	if !s.secure {
		mode = "plaintext"
	}
	fmt.Printf("e2e: stack up and healthy in %.1fs (network %s, %s)\n", time.Since(begin).Seconds(), s.network, mode)
	return nil
}

// discover finds the containers of the project and its network.
func (s *stack) discover() error {
	for _, svc := range append(slices.Clone(services), oneShots...) {
		out, err := s.docker(30*time.Second, "ps", "-a", "-q", "--no-trunc",
			"--filter", "label=com.docker.compose.project="+project,
			"--filter", "label=com.docker.compose.service="+svc)
		if err != nil {
			return err
		}
		ids := strings.Fields(out)
		if len(ids) != 1 {
			return fmt.Errorf("service %s: want 1 container, found %d", svc, len(ids))
		}
		s.ids[svc] = ids[0]
	}
	out, err := s.docker(30*time.Second, "inspect", "-f", "{{json .NetworkSettings.Networks}}", s.ids["broker-1"])
	if err != nil {
		return err
	}
	var nets map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &nets); err != nil || len(nets) != 1 {
		return fmt.Errorf("broker-1 networks %s: %v", out, err)
	}
	for n := range nets {
		s.network = n
	}
	return nil
}

// copyPKI copies the pki volume out of the pki service's container (it
// exited, but its files stay readable with docker cp) into a temporary
// directory: the tests' clients present the admin certificate.
func (s *stack) copyPKI() error {
	dir, err := os.MkdirTemp("", "tidemark-e2e-pki-")
	if err != nil {
		return err
	}
	if _, err := s.docker(60*time.Second, "cp", s.id("pki")+":/pki", dir); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("copying the certificates out of the pki service: %w", err)
	}
	s.pkiDir = filepath.Join(dir, "pki")
	return nil
}

// clientTLS is the mutual TLS configuration of a client presenting name's
// certificate; nil on a plaintext stack.
func (s *stack) clientTLS(name string) (*tls.Config, error) {
	if !s.secure {
		return nil, nil
	}
	return pki.Options(s.pkiDir, name).Client()
}

// id is the container of a service.
func (s *stack) id(svc string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[svc]
}

// containerState is what `docker inspect` says about a container.
type containerState struct {
	Running  bool
	Health   string // healthy, unhealthy, starting or "" without a check
	Networks []string
}

func (s *stack) inspect(svc string) (containerState, error) {
	out, err := s.docker(30*time.Second, "inspect", "-f",
		"{{.State.Running}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}",
		s.id(svc))
	if err != nil {
		return containerState{}, err
	}
	f := strings.Fields(out)
	if len(f) < 2 {
		return containerState{}, fmt.Errorf("inspect %s: %q", svc, out)
	}
	return containerState{Running: f[0] == "true", Health: f[1], Networks: f[2:]}, nil
}

// waitHealthy waits until the services' containers report healthy.
func (s *stack) waitHealthy(svcs []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var bad []string
		for _, svc := range svcs {
			cs, err := s.inspect(svc)
			if err != nil {
				return err
			}
			if !cs.Running || cs.Health != "healthy" {
				bad = append(bad, fmt.Sprintf("%s (running=%v health=%s)", svc, cs.Running, cs.Health))
			}
		}
		if len(bad) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy within %v: %s", timeout, strings.Join(bad, ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// kill sends SIGKILL to a service's container: a crash.
func (s *stack) kill(t *testing.T, svc string) {
	t.Helper()
	if _, err := s.docker(30*time.Second, "kill", s.id(svc)); err != nil {
		t.Fatalf("docker kill %s: %v", svc, err)
	}
}

// stop stops a service's container gracefully (SIGTERM, then SIGKILL after 30 s).
func (s *stack) stop(t *testing.T, svc string) {
	t.Helper()
	if _, err := s.docker(60*time.Second, "stop", "-t", "30", s.id(svc)); err != nil {
		t.Fatalf("docker stop %s: %v", svc, err)
	}
}

// startSvc starts a stopped or killed service container again.
func (s *stack) startSvc(t *testing.T, svc string) {
	t.Helper()
	if _, err := s.docker(60*time.Second, "start", s.id(svc)); err != nil {
		t.Fatalf("docker start %s: %v", svc, err)
	}
}

// disconnect cuts a service's container off the compose network.
func (s *stack) disconnect(t *testing.T, svc string) {
	t.Helper()
	if _, err := s.docker(30*time.Second, "network", "disconnect", s.network, s.id(svc)); err != nil {
		t.Fatalf("docker network disconnect %s: %v", svc, err)
	}
}

// connect puts a service's container back on the compose network under its
// service name, the name the others dial.
func (s *stack) connect(t *testing.T, svc string) {
	t.Helper()
	if _, err := s.docker(30*time.Second, "network", "connect", "--alias", svc, s.network, s.id(svc)); err != nil {
		t.Fatalf("docker network connect %s: %v", svc, err)
	}
}

// restore brings back whatever a test left broken: containers stopped or
// killed are started, containers cut off are connected again.
func (s *stack) restore(t *testing.T) {
	t.Helper()
	for _, svc := range services {
		cs, err := s.inspect(svc)
		if err != nil {
			t.Errorf("restore: %v", err)
			continue
		}
		if !slices.Contains(cs.Networks, s.network) {
			t.Logf("restore: reconnecting %s", svc)
			if _, err := s.docker(30*time.Second, "network", "connect", "--alias", svc, s.network, s.id(svc)); err != nil {
				t.Errorf("restore: %v", err)
			}
		}
		if !cs.Running {
			t.Logf("restore: starting %s", svc)
			if _, err := s.docker(60*time.Second, "start", s.id(svc)); err != nil {
				t.Errorf("restore: %v", err)
			}
		}
	}
}

// logsSince returns a service's log lines since a time.
func (s *stack) logsSince(svc string, since time.Time) string {
	out, _ := s.docker(30*time.Second, "logs", "--since", since.UTC().Format(time.RFC3339Nano), s.id(svc))
	return out
}

// etcdctl runs the host's etcdctl (.bin, on make's PATH) against the
// stack's published etcd port, as the etcd user whose certificate it
// presents from the host copy of the pki on a secure stack (the
// certificate's Common Name is the etcd user); user is ignored on a
// plaintext one. The etcd container holds only etcd's own and root's
// certificates, so other users cannot run from inside it.
func (s *stack) etcdctl(user string, args ...string) (string, error) {
	var full []string
	if s.secure {
		full = append(full, "--endpoints=https://127.0.0.1:"+stackPorts["ETCD_PORT"], "--cacert="+pki.CAPath(s.pkiDir))
		if user != "" {
			full = append(full, "--cert="+pki.CertPath(s.pkiDir, user), "--key="+pki.KeyPath(s.pkiDir, user))
		}
	} else {
		full = append(full, "--endpoints=127.0.0.1:"+stackPorts["ETCD_PORT"])
	}
	return s.run(30*time.Second, "etcdctl", append(full, args...)...)
}

// etcdGet reads one key with the etcdctl inside the etcd container, as the
// admin user (read access to tidemark's keys).
func (s *stack) etcdGet(key string) (string, error) {
	return s.etcdctl("admin", "get", key, "--print-value-only")
}

// saveLogs writes every container's log into the log directory.
func (s *stack) saveLogs() {
	if s.logDir == "" {
		return
	}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return
	}
	for svc, id := range s.ids {
		out, _ := s.docker(60*time.Second, "logs", "-t", id)
		_ = os.WriteFile(filepath.Join(s.logDir, svc+".log"), []byte(out+"\n"), 0o644)
	}
	fmt.Printf("e2e: container logs saved in %s\n", s.logDir)
}

// down removes the project's containers, network and volumes.
func (s *stack) down() {
	s.mu.Lock()
	if s.downed {
		s.mu.Unlock()
		return
	}
	s.downed = true
	s.mu.Unlock()
	if s.pkiDir != "" {
		_ = os.RemoveAll(filepath.Dir(s.pkiDir))
	}
	begin := time.Now()
	if out, err := s.composeCmd(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: down: %v\n%s\n", err, out)
		return
	}
	fmt.Printf("e2e: stack removed in %.1fs\n", time.Since(begin).Seconds())
}

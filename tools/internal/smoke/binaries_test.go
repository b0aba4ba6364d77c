// Package smoke checks the built binaries the way an operator meets them:
// each one starts, answers gRPC reflection (what `grpcurl list` uses) and
// the health check, and exits 0 on SIGTERM.
package smoke

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"tidemark.io/services/metastore/embedded"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/platform/tlsconf"
)

// repoRoot finds the workspace root (the directory holding go.work).
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == "off" {
		testenv.Unavailable(t, "the go.work workspace (to build the binaries)", "run from a clone of the repository with GOWORK unset")
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func buildBinaries(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/",
		"tidemark.io/services/broker/cmd/broker",
		"tidemark.io/services/controller/cmd/controller",
		"tidemark.io/gateway/cmd/gateway",
		"tidemark.io/tools/cmd/tidemark")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// freeAddr is a free loopback address below the ephemeral port range, so a
// node restarted on it finds it free again (see platform/loopback).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestBinariesAnswerReflectionHealthAndStopOnSIGTERM(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: builds binaries")
	}
	bin := buildBinaries(t)
	// Brokers and controllers register in etcd: give them a real one.
	etcd, err := embedded.Start(embedded.Config{Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	endpoints := strings.TrimPrefix(etcd.ClientURL(), "http://")
	// Brokers and controllers run with mutual TLS, as `make run` starts
	// them; the callers below present the operator's certificate.
	certs := t.TempDir()
	if _, err := pki.Ensure(certs, pki.Leaf{Name: "broker-7"}, pki.Leaf{Name: "controller-2"}, pki.Leaf{Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	tlsArgs := func(name string) []string {
		o := pki.Options(certs, name)
		return []string{"--tls.ca", o.CA, "--tls.cert", o.Cert, "--tls.key", o.Key}
	}
	admin := pki.Options(certs, "admin")
	adminArgs := tlsArgs("admin")
	cases := []struct {
		name     string
		args     func(addr string) []string
		caller   tlsconf.Options
		cliArgs  []string
		services []string
	}{
		{"broker", func(a string) []string {
			return append([]string{"--listen", a, "--data.dir", t.TempDir(), "--broker.id", "7", "--etcd.endpoints", endpoints}, tlsArgs("broker-7")...)
		}, admin, adminArgs, []string{"tidemark.broker.v1.BrokerService", "tidemark.replication.v1.ReplicationService",
			"tidemark.control.v1.BrokerControlService", "tidemark.fault.v1.FaultInjectionService",
			"grpc.health.v1.Health"}},
		{"controller", func(a string) []string {
			return append([]string{"--listen", a, "--controller.id", "2", "--etcd.endpoints", endpoints}, tlsArgs("controller-2")...)
		}, admin, adminArgs, []string{"tidemark.admin.v1.AdminService", "tidemark.control.v1.ControllerService", "grpc.health.v1.Health"}},
		{"gateway", func(a string) []string {
			return []string{"--listen", a, "--plaintext"}
		}, tlsconf.Plain(), []string{"--plaintext"}, []string{"grpc.health.v1.Health"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			cmd := exec.Command(filepath.Join(bin, tc.name), tc.args(addr)...)
			var logs strings.Builder
			cmd.Stderr = &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
				}
			}()

			dial, err := tc.caller.DialOption()
			if err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, addr, dial, exited, &logs)
			got := listServices(t, addr, dial)
			for _, want := range tc.services {
				if !slices.Contains(got, want) {
					t.Errorf("reflection lists %v, missing %s", got, want)
				}
			}
			if !slices.Contains(got, "grpc.reflection.v1.ServerReflection") {
				t.Errorf("reflection service itself not listed: %v", got)
			}

			// The CLI's health command is what compose health checks run.
			out, err := exec.Command(filepath.Join(bin, "tidemark"), append([]string{"health", "--addr", addr}, tc.cliArgs...)...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "SERVING") {
				t.Errorf("tidemark health: %v: %s", err, out)
			}

			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("did not exit within 20s of SIGTERM\n%s", logs.String())
			}
			if !strings.Contains(logs.String(), "stopped") {
				t.Errorf("no shutdown log line:\n%s", logs.String())
			}
		})
	}
}

func TestBadFlagIsNamedAndExitsNonZero(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: builds binaries")
	}
	bin := buildBinaries(t)
	out, err := exec.Command(filepath.Join(bin, "broker"), "--listen", "nonsense").CombinedOutput()
	if err == nil {
		t.Fatal("broker accepted --listen nonsense")
	}
	if !strings.Contains(string(out), "--listen") || !strings.Contains(string(out), "TIDEMARK_LISTEN") {
		t.Errorf("error does not name the flag and its variable: %s", out)
	}
	cmd := exec.Command(filepath.Join(bin, "controller"))
	cmd.Env = append(os.Environ(), "TIDEMARK_CONTROLLER_ID=x")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "TIDEMARK_CONTROLLER_ID") {
		t.Errorf("bad env value not reported: %v %s", err, out)
	}
	out, err = exec.Command(filepath.Join(bin, "tidemark"), "health", "--bogus").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("bad CLI flag should exit 2, got %v: %s", err, out)
	}
}

func waitHealthy(t *testing.T, addr string, dial grpc.DialOption, exited <-chan error, logs fmt.Stringer) {
	t.Helper()
	conn, err := grpc.NewClient(addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("exited early: %v\n%s", err, logs.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never became healthy\n%s", addr, logs.String())
}

func listServices(t *testing.T, addr string, dial grpc.DialOption) []string {
	t.Helper()
	conn, err := grpc.NewClient(addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names
}

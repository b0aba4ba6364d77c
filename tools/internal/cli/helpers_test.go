package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tidemark.io/tools/internal/cli"
)

// result is one CLI run.
type result struct {
	code     int
	out, err string
	took     time.Duration
}

// runCLI runs the CLI in-process with the given standard input, an empty
// environment, and a deadline so that no test can hang on it.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return runCtx(ctx, nil, stdin, args...)
}

// runEnv runs the CLI with env as its whole environment.
func runEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return runCtx(ctx, env, "", args...)
}

func runCtx(ctx context.Context, env map[string]string, stdin string, args ...string) result {
	var out, errb strings.Builder
	start := time.Now()
	code := cli.Run(ctx, args, cli.Streams{In: strings.NewReader(stdin), Out: &out, Err: &errb,
		Getenv: func(k string) string { return env[k] }})
	return result{code: code, out: out.String(), err: errb.String(), took: time.Since(start)}
}

// ok fails the test unless the run succeeded.
func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
	}
	return r
}

// fails checks the exit code and that stderr names want.
func (r result) fails(t *testing.T, code int, want string) result {
	t.Helper()
	if r.code != code || !strings.Contains(r.err, want) {
		t.Fatalf("exit %d, want %d with %q in stderr\nstdout:\n%s\nstderr:\n%s", r.code, code, want, r.out, r.err)
	}
	return r
}

func contains(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("output lacks %q:\n%s", w, got)
		}
	}
}

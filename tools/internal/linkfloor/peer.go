package linkfloor

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"tidemark.io/services/platform/pki"
)

// The two ends' certificates, issued by a CA made for one measurement.
const (
	serverName = "link-server"
	clientName = "link-client"
)

// IssueCerts makes a CA in dir and a certificate for each end.
func IssueCerts(dir string) error {
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		return err
	}
	for _, name := range []string{serverName, clientName} {
		if err := ca.IssueFiles(dir, pki.Leaf{Name: name}); err != nil {
			return err
		}
	}
	return nil
}

// ServerConfig and ClientConfig are each end's mutual TLS, from dir.
func ServerConfig(dir string) (*tls.Config, error) { return pki.Options(dir, serverName).Server() }
func ClientConfig(dir string) (*tls.Config, error) { return pki.Options(dir, clientName).Client() }

// peerStartTimeout bounds the wait for the peer's addresses.
const peerStartTimeout = 10 * time.Second

// Peer is the echo process.
type Peer struct {
	TLSAddr, GRPCAddr string

	cmd   *exec.Cmd
	stdin io.Closer
}

// StartPeer runs cmd, which must Serve and stop when its standard input
// closes, and waits for the addresses it prints.
func StartPeer(cmd *exec.Cmd) (*Peer, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Peer{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout) // drains until the peer exits
	}()
	select {
	case s := <-line:
		addrs := strings.Fields(s)
		if len(addrs) != 2 {
			p.Stop()
			return nil, fmt.Errorf("echo peer printed %q, want its two addresses", s)
		}
		p.TLSAddr, p.GRPCAddr = addrs[0], addrs[1]
		return p, nil
	case <-time.After(peerStartTimeout):
		p.Stop()
		return nil, fmt.Errorf("echo peer gave no addresses within %v", peerStartTimeout)
	}
}

// Stop closes the peer's input, which ends it, and waits for it; a peer
// that does not end within a few seconds is killed.
func (p *Peer) Stop() error {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill() // Wait reports the outcome
		return errors.Join(errors.New("echo peer did not stop when its input closed; killed"), <-done)
	}
}

// ServeUntilEOF is the peer's side: Serve with dir's server certificate
// until in (the parent's pipe) closes.
func ServeUntilEOF(ctx context.Context, dir string, in io.Reader, out io.Writer) error {
	cfg, err := ServerConfig(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, in) // any end of input ends the peer
		cancel()
	}()
	return Serve(ctx, cfg, out)
}

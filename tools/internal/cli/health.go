package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"tidemark.io/services/platform/tlsconf"
)

// newHealthCmd checks a node with the standard gRPC health protocol; compose
// health checks and scripts use it (the images have no shell). With
// --tls.ca it speaks mutual TLS with --tls.cert; inside a container the
// environment twins are the service's own, so a node's health check
// presents the node's certificate.
func newHealthCmd() *cobra.Command {
	var addr, service string
	var timeout time.Duration
	var tlsOpts tlsconf.Options
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that a broker, controller or gateway answers its gRPC health check",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			creds, err := healthCreds(tlsOpts)
			if err != nil {
				return err
			}
			st, err := checkHealthWith(ctx, addr, service, creds)
			if err != nil {
				return fmt.Errorf("%s: %w", addr, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", addr, st)
			if st != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("%s is %s", addr, st)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9092", "node address (host:port)")
	cmd.Flags().StringVar(&service, "service", "", "service name to check; empty checks the whole node")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for an answer")
	cmd.Flags().StringVar(&tlsOpts.CA, "tls.ca", "", "PEM CA file the node's certificate chains to; turns TLS on (empty: plaintext)")
	cmd.Flags().StringVar(&tlsOpts.Cert, "tls.cert", "", "PEM client certificate to present (with --tls.ca)")
	cmd.Flags().StringVar(&tlsOpts.Key, "tls.key", "", "PEM private key of --tls.cert")
	cmd.Flags().StringVar(&tlsOpts.ServerName, "tls.server.name", "", "name expected in the node's certificate; empty uses the host of --addr")
	cmd.Flags().BoolVar(&tlsOpts.Plaintext, "plaintext", false, "no TLS, whatever the --tls.* flags or their environment twins say (Jaeger's health endpoint; a stack started with --plaintext)")
	withEnv(cmd.Flags(), "tls.ca", "tls.cert", "tls.key", "tls.server.name", "plaintext")
	return cmd
}

// healthCreds is mutual TLS when a CA is given, plaintext with --plaintext
// or without a CA.
func healthCreds(o tlsconf.Options) (grpc.DialOption, error) {
	if o.Plaintext {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	if o.CA == "" {
		if o.Cert != "" || o.Key != "" {
			return nil, usagef("--tls.cert and --tls.key need --tls.ca")
		}
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	if o.Cert == "" || o.Key == "" {
		return nil, usagef("--tls.ca needs --tls.cert and --tls.key (nodes require a client certificate)")
	}
	opt, err := o.DialOption()
	if err != nil {
		return nil, usagef("%v", err)
	}
	return opt, nil
}

func checkHealth(ctx context.Context, addr, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	return checkHealthWith(ctx, addr, service, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func checkHealthWith(ctx context.Context, addr, service string, creds grpc.DialOption) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpc.NewClient(addr, creds)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return 0, err
	}
	return resp.GetStatus(), nil
}

package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// newHealthCmd checks a node with the standard gRPC health protocol; compose
// health checks and scripts use it (the images have no shell).
func newHealthCmd(g *globals) *cobra.Command {
	var addr, service string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that a broker, controller or gateway answers its gRPC health check",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usagef("--timeout must be positive, got %v", timeout)
			}
			if err := checkAddrs("--addr", []string{addr}); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			dial, err := g.dialOption()
			if err != nil {
				return err
			}
			st, err := checkHealth(ctx, addr, service, dial)
			if err != nil {
				return fmt.Errorf("%s: %s", addr, dialReason(err, g.tlsFlags.Plaintext, fmt.Sprintf("--timeout %v", timeout)))
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
	return cmd
}

func checkHealth(ctx context.Context, addr, service string, dial grpc.DialOption) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpc.NewClient(addr, dial)
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

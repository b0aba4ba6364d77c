package kafkaapi

import "context"

// authorize decides a Kafka request as the gRPC method it corresponds to,
// with the same policy and ACLs: req is that method's request message, so
// one table (authz/policies.go) governs both front doors. The principal is
// the one conn.go stored in ctx (the client certificate's Common Name, or
// anonymous over plaintext, where authorization is off).
func (s *Server) authorize(ctx context.Context, method string, req any) error {
	if s.opts.Authorizer == nil {
		return nil
	}
	_, err := s.opts.Authorizer.Authorize(ctx, method, req)
	return err
}

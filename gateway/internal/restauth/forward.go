package restauth

import (
	"context"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"tidemark.io/services/platform/identity"
)

type userKey struct{}

// WithUser records in ctx the REST user a request was authenticated as;
// every gRPC call made with ctx (or a context derived from it) over a
// connection with ForwardUser forwards that user.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// UserFrom is the user WithUser recorded, if any.
func UserFrom(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userKey{}).(string)
	return u, ok && u != ""
}

// ForwardUser is the dial options that make every call on a connection
// speak for the REST user of its context (identity.Forward). They also
// drop, whatever the context carries, any on-behalf-of value not set here
// and any authorization metadata: a REST caller's header must never name
// another user, and its token never leaves the gateway.
func ForwardUser() []grpc.DialOption {
	return forwardAs(UserFrom)
}

// ForwardFixedUser speaks for user on every call of a connection,
// whatever the context: for work done in the background for one user (a
// producer's batches).
func ForwardFixedUser(user string) []grpc.DialOption {
	return forwardAs(func(context.Context) (string, bool) { return user, user != "" })
}

func forwardAs(who func(context.Context) (string, bool)) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(outgoing(ctx, who), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
			method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(outgoing(ctx, who), desc, cc, method, opts...)
		}),
	}
}

// outgoing is ctx with its outgoing metadata naming exactly the user who
// gives, and no authorization.
func outgoing(ctx context.Context, who func(context.Context) (string, bool)) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	user, ok := who(ctx)
	if !ok && len(md.Get(identity.OnBehalfOf)) == 0 && len(md.Get("authorization")) == 0 && len(md.Get(identity.ClientHost)) == 0 {
		return ctx
	}
	md = md.Copy()
	md.Delete(identity.OnBehalfOf)
	md.Delete(identity.ClientHost)
	md.Delete("authorization")
	ctx = metadata.NewOutgoingContext(ctx, md)
	if ok {
		ctx = identity.ForwardFrom(ctx, user, remoteIP(md))
	}
	return ctx
}

// remoteIP is the address the REST request came from: the last entry of
// x-forwarded-for, which grpc-gateway appends from the connection's remote
// address (the entries before it are the client's to write). "" for a call
// made outside a REST request.
func remoteIP(md metadata.MD) string {
	v := md.Get("x-forwarded-for")
	if len(v) == 0 {
		return ""
	}
	all := strings.Split(v[len(v)-1], ",")
	ip := strings.TrimSpace(all[len(all)-1])
	if net.ParseIP(ip) == nil {
		return ""
	}
	return ip
}

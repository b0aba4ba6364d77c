// Package linkfloor measures the floor under a synchronous write on one
// machine: the round trip of one small message each way between two
// processes over mutual TLS on loopback, once on a bare TLS connection and
// once on a gRPC stream set up as tidemark's links are (tlsconf.Credentials,
// flowcontrol's static windows).
//
// A synchronous acks=all write takes at least two such round trips in any
// system that replicates before it answers: client to leader and back, and
// leader to a follower and back (tidemark: the follower's parked fetch and
// its next one; a Raft log: AppendEntries and its answer). So one producer
// that waits for each write cannot do more than 1 / (2 × round trip) writes
// a second, whatever the brokers do in between; what a system's p50 has
// above two round trips is its own work and its extra hand-offs.
package linkfloor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"

	"tidemark.io/services/platform/flowcontrol"
	"tidemark.io/services/platform/tlsconf"
)

// Latency summarises the round trips of one link.
type Latency struct {
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	Mean time.Duration `json:"mean_ns"`
}

// Result is one measurement: RoundTrips of Size bytes each way on each link.
type Result struct {
	Size       int     `json:"size"`
	RoundTrips int     `json:"round_trips"`
	TLS        Latency `json:"tls"`
	GRPC       Latency `json:"grpc"`
}

// warmup round trips are done and not timed: the first ones pay for the
// connection's buffers, the runtime's threads and the CPU caches.
const warmup = 200

// Serve echoes on two loopback listeners, bare TLS and a gRPC stream, with
// the server side of cfg (mutual TLS). It writes "TLSADDR GRPCADDR\n" to
// ready once both listen, and serves until ctx ends.
func Serve(ctx context.Context, cfg *tls.Config, ready io.Writer) error {
	tl, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		return err
	}
	defer tl.Close()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := grpc.NewServer(append(flowcontrol.ServerOptions(), grpc.Creds(tlsconf.Credentials(cfg)),
		grpc.ForceServerCodec(rawCodec{}))...)
	srv.RegisterService(&echoDesc, nil)
	go func() { _ = srv.Serve(gl) }() // ends with Stop below
	defer srv.Stop()
	go acceptEchoes(tl)
	if _, err := fmt.Fprintf(ready, "%s %s\n", tl.Addr(), gl.Addr()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func acceptEchoes(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go echoConn(c)
	}
}

// echoConn sends back every byte it reads, as it reads it.
func echoConn(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Measure times n round trips of size bytes on each of Serve's links, with
// the client side of cfg.
func Measure(ctx context.Context, tlsAddr, grpcAddr string, cfg *tls.Config, size, n int) (Result, error) {
	if size <= 0 || n <= 0 {
		return Result{}, fmt.Errorf("size and round trips must be positive, got %d and %d", size, n)
	}
	res := Result{Size: size, RoundTrips: n}
	var err error
	if res.TLS, err = measureTLS(ctx, tlsAddr, cfg, size, n); err != nil {
		return res, fmt.Errorf("bare TLS link: %w", err)
	}
	if res.GRPC, err = measureGRPC(ctx, grpcAddr, cfg, size, n); err != nil {
		return res, fmt.Errorf("gRPC stream: %w", err)
	}
	return res, nil
}

func measureTLS(ctx context.Context, addr string, cfg *tls.Config, size, n int) (Latency, error) {
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Latency{}, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl) // bounds a lost echo
	}
	out, in := make([]byte, size), make([]byte, size)
	return timeRoundTrips(n, func() error {
		if _, err := c.Write(out); err != nil {
			return err
		}
		_, err := io.ReadFull(c, in)
		return err
	})
}

func measureGRPC(ctx context.Context, addr string, cfg *tls.Config, size, n int) (Latency, error) {
	cc, err := grpc.NewClient(addr, append(flowcontrol.DialOptions(),
		grpc.WithTransportCredentials(tlsconf.Credentials(cfg)))...)
	if err != nil {
		return Latency{}, err
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := cc.NewStream(ctx, &echoDesc.Streams[0], echoMethod, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return Latency{}, err
	}
	out := make([]byte, size)
	var in []byte
	lat, err := timeRoundTrips(n, func() error {
		if err := st.SendMsg(&out); err != nil {
			return err
		}
		if err := st.RecvMsg(&in); err != nil {
			return err
		}
		if len(in) != size {
			return fmt.Errorf("echo of %d bytes came back with %d", size, len(in))
		}
		return nil
	})
	_ = st.CloseSend() // the stream is cancelled on return
	return lat, err
}

// timeRoundTrips runs warmup untimed round trips, then n timed ones.
func timeRoundTrips(n int, roundTrip func() error) (Latency, error) {
	for range warmup {
		if err := roundTrip(); err != nil {
			return Latency{}, err
		}
	}
	times := make([]time.Duration, n)
	var sum time.Duration
	for i := range times {
		start := time.Now()
		if err := roundTrip(); err != nil {
			return Latency{}, err
		}
		times[i] = time.Since(start)
		sum += times[i]
	}
	slices.Sort(times)
	return Latency{P50: quantile(times, 0.50), P99: quantile(times, 0.99), Mean: sum / time.Duration(n)}, nil
}

// quantile of sorted times, by the nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// The gRPC echo: one bidirectional stream that answers each message with
// its bytes. No protobuf: the floor is the transport's, below any message
// encoding.
const echoMethod = "/tidemark.linkfloor.Echo/Echo"

var echoDesc = grpc.ServiceDesc{
	ServiceName: "tidemark.linkfloor.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Echo",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, st grpc.ServerStream) error {
			var msg []byte
			for {
				if err := st.RecvMsg(&msg); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				if err := st.SendMsg(&msg); err != nil {
					return err
				}
			}
		},
	}},
}

// rawCodec carries a *[]byte as the message's bytes.
type rawCodec struct{}

func (rawCodec) Name() string { return "linkfloor-raw" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	p, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("linkfloor codec: %T is not *[]byte", v)
	}
	return *p, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("linkfloor codec: %T is not *[]byte", v)
	}
	*p = append((*p)[:0], data...) // the transport reuses data
	return nil
}

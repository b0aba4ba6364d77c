package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// reflectionCaller does what grpcurl does, in process: it learns the
// service's types from the server's reflection service (never from the
// compiled-in protos), builds the request from JSON, and prints the answer
// or the error status as JSON.
type reflectionCaller struct{}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// reflect sends one reflection request and returns the answer.
func reflect(t testing.TB, cc *grpc.ClientConn, req *rpb.ServerReflectionRequest) *rpb.ServerReflectionResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.GetErrorResponse(); e != nil {
		t.Fatalf("reflection: %s", e.GetErrorMessage())
	}
	return resp
}

func (reflectionCaller) list(t testing.TB, addr string) []string {
	resp := reflect(t, dial(t, addr), &rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
	var out []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		out = append(out, s.GetName())
	}
	return out
}

// files fetches the file defining symbol with everything it imports.
func files(t testing.TB, cc *grpc.ClientConn, symbol string) *protoregistry.Files {
	t.Helper()
	resp := reflect(t, cc, &rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}})
	set := &descriptorpb.FileDescriptorSet{}
	for _, raw := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(raw, fd); err != nil {
			t.Fatal(err)
		}
		set.File = append(set.File, fd)
	}
	reg, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("descriptors of %s: %v", symbol, err)
	}
	return reg
}

func (reflectionCaller) call(t testing.TB, addr, method, body string) (string, bool) {
	t.Helper()
	cc := dial(t, addr)
	svc, name, _ := strings.Cut(method, "/")
	reg := files(t, cc, svc)
	d, err := reg.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		t.Fatalf("%s: %v", svc, err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("%s has no method %s", svc, name)
	}
	types := dynamicpb.NewTypes(reg)
	in, out := dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output())
	if err := (protojson.UnmarshalOptions{Resolver: types}).Unmarshal([]byte(body), in); err != nil {
		t.Fatalf("request for %s: %v", method, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	marshal := protojson.MarshalOptions{Resolver: types}
	if err := cc.Invoke(ctx, "/"+method, in, out); err != nil {
		st, _ := status.FromError(err)
		js, merr := marshal.Marshal(st.Proto())
		if merr != nil {
			t.Fatalf("rendering %v: %v", err, merr)
		}
		return string(js), false
	}
	js, err := marshal.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(js), true
}

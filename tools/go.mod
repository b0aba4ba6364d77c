module tidemark.io/tools

go 1.26.0

replace (
	tidemark.io/gateway => ../gateway
	tidemark.io/proto => ../proto
	tidemark.io/services => ../services
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	tidemark.io/gateway v0.0.0-00010101000000-000000000000
	tidemark.io/proto v0.0.0-00010101000000-000000000000
	tidemark.io/services v0.0.0-00010101000000-000000000000
)

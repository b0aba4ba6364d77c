package benchcmp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// profile runs shape s once more, unrecorded, on a stream of its own and
// saves each nats-server's CPU profile over profileSeconds of the run into
// dir, named by the node's role for the stream (leader or follower, read
// from the stream's info after the run). It returns the files and where
// each server's CPU went; the client (nats bench, or nats.go in the
// harness for the paced shapes) is not profiled.
func (j *jetStreamSide) profile(ctx context.Context, s Shape, dir string) ([]string, []ProcessCPU, error) {
	label := s.Label()
	s.Name += "-profiled"
	done := make(chan Figure, 1)
	go func() { done <- j.run(ctx, s) }()
	// Let the tool start, connect and create its stream first.
	time.Sleep(500 * time.Millisecond)
	paths := make([]string, len(j.nodes))
	errs := make([]error, len(j.nodes))
	var wg sync.WaitGroup
	for i, addr := range j.profilers {
		paths[i] = filepath.Join(dir, fmt.Sprintf("jetstream-%s-%s.cpu.pprof", s.Name, j.nodes[i].name))
		wg.Go(func() {
			errs[i] = fetch(ctx, "http://"+addr+"/debug/pprof/profile?seconds="+strconv.Itoa(profileSeconds), paths[i])
		})
	}
	wg.Wait()
	f := <-done
	if f.Err != "" {
		return nil, nil, errors.New(f.Err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	leader, err := j.streamLeader(ctx, streamOf(s))
	if err != nil {
		return paths, nil, fmt.Errorf("the leader of stream %s: %w", streamOf(s), err)
	}
	var cpus []ProcessCPU
	for i, path := range paths {
		c, err := cpuOfProfile(path)
		if err != nil {
			return paths, nil, err
		}
		c.Shape, c.System, c.Process, c.Role = label, "jetstream", j.nodes[i].name, "follower"
		if c.Process == leader {
			c.Role = "leader"
		}
		cpus = append(cpus, c)
	}
	return paths, cpus, nil
}

// streamLeader is the server that leads stream.
func (j *jetStreamSide) streamLeader(ctx context.Context, stream string) (string, error) {
	opts, err := j.connectOptions(nats.Timeout(5 * time.Second))
	if err != nil {
		return "", err
	}
	nc, err := nats.Connect(j.urls[0], opts...)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return "", err
	}
	si, err := js.StreamInfo(stream, nats.Context(ctx))
	if err != nil {
		return "", err
	}
	if si.Cluster == nil || si.Cluster.Leader == "" {
		return "", errors.New("no stream leader")
	}
	return si.Cluster.Leader, nil
}

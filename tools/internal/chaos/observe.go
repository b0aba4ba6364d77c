package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest/history"
)

// offsets are one replica's HW and LEO as its broker reports them.
type offsets struct{ hw, leo int64 }

// scrapeOffsets reads a broker's /metrics: tidemark_broker_high_watermark
// and tidemark_broker_log_end_offset are computed from each hosted
// replica's state machine at scrape time, so they are the broker's own
// current view, not a report relayed through the controller (WatchCluster's
// progress reports lag by a report interval and stop when the session
// breaks).
func scrapeOffsets(ctx context.Context, hc *http.Client, addr string) (map[history.TP]offsets, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	return parseOffsets(resp.Body)
}

// parseOffsets picks the HW and LEO gauges out of Prometheus text.
func parseOffsets(r io.Reader) (map[history.TP]offsets, error) {
	out := map[history.TP]offsets{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var hw bool
		switch {
		case strings.HasPrefix(line, "tidemark_broker_high_watermark{"):
			hw = true
		case strings.HasPrefix(line, "tidemark_broker_log_end_offset{"):
		default:
			continue
		}
		open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if end < open {
			return nil, fmt.Errorf("metrics: malformed line %q", line)
		}
		var tp history.TP
		havePart := false
		for _, kv := range strings.Split(line[open+1:end], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			v = strings.Trim(v, `"`)
			switch k {
			case "topic":
				tp.Topic = v
			case "partition":
				p, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("metrics: bad partition in %q", line)
				}
				tp.Partition, havePart = int32(p), true
			}
		}
		val, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if tp.Topic == "" || !havePart || err != nil {
			return nil, fmt.Errorf("metrics: malformed line %q", line)
		}
		o := out[tp]
		if hw {
			o.hw = int64(val)
		} else {
			o.leo = int64(val)
		}
		out[tp] = o
	}
	return out, sc.Err()
}

// observation is the cluster as seen at one moment: the controller's
// leaders and ISRs, and each broker's own HW and LEO per replica.
type observation struct {
	at         time.Time
	partitions []history.PartitionState
}

// observe asks the active controller for every topic of the run and
// scrapes every broker. A broker that does not answer makes its replicas
// unreadable in this observation.
func (r *runner) observe(ctx context.Context) (observation, error) {
	obs := observation{at: time.Now()}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	desc, err := r.admin.DescribeTopics(dctx, &adminv1.DescribeTopicsRequest{Topics: r.topicNames()})
	cancel()
	if err != nil {
		return obs, fmt.Errorf("DescribeTopics: %w", err)
	}
	scraped := map[int32]map[history.TP]offsets{}
	for id, addr := range r.brokerMetrics {
		if m, err := scrapeOffsets(ctx, r.http, addr); err == nil {
			scraped[id] = m
		}
	}
	for _, t := range desc.GetTopics() {
		for _, p := range t.GetPartitions() {
			ps := history.PartitionState{TP: history.TP{Topic: t.GetName(), Partition: p.GetPartition()},
				Leader: p.GetLeader(), ISR: slices.Clone(p.GetIsr()), MinInsyncReplicas: p.GetMinInsyncReplicas(),
				Adding: slices.Clone(p.GetAddingReplicas()), Removing: slices.Clone(p.GetRemovingReplicas())}
			slices.Sort(ps.ISR)
			for _, b := range p.GetReplicas() {
				rs := history.ReplicaState{Broker: b}
				if o, ok := scraped[b][ps.TP]; ok {
					rs.Readable, rs.HW, rs.LEO = true, o.hw, o.leo
				}
				ps.Replicas = append(ps.Replicas, rs)
			}
			obs.partitions = append(obs.partitions, ps)
		}
	}
	slices.SortFunc(obs.partitions, func(a, b history.PartitionState) int {
		return strings.Compare(a.TP.String(), b.TP.String())
	})
	return obs, nil
}

// line renders a partition's state on one line for the timeline.
func stateLine(ps history.PartitionState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s leader %d ISR %v", ps.TP, ps.Leader, ps.ISR)
	if len(ps.Adding)+len(ps.Removing) > 0 {
		fmt.Fprintf(&b, " reassigning (adding %v, removing %v)", ps.Adding, ps.Removing)
	}
	for _, r := range ps.Replicas {
		if !r.Readable {
			fmt.Fprintf(&b, " | %d: -", r.Broker)
			continue
		}
		fmt.Fprintf(&b, " | %d: HW %d LEO %d", r.Broker, r.HW, r.LEO)
	}
	return b.String()
}

// watch observes the cluster every interval until stop is closed and puts
// each change of a partition's leader, ISR or reassignment on the timeline, so a report
// shows what the faults did (and a stuck ISR shows when it got stuck).
func (r *runner) watch(ctx context.Context, stop <-chan struct{}, interval time.Duration) {
	prev := map[history.TP]string{}
	for {
		select {
		case <-stop:
			return
		case <-time.After(interval):
		}
		obs, err := r.observe(ctx)
		if err != nil {
			continue
		}
		// One line per distinct change, naming the partitions it hit.
		var changes []string
		hit := map[string][]string{}
		for _, ps := range obs.partitions {
			now := fmt.Sprintf("leader %d ISR %v", ps.Leader, ps.ISR)
			if len(ps.Adding)+len(ps.Removing) > 0 {
				now += fmt.Sprintf(" reassigning +%v -%v", ps.Adding, ps.Removing)
			}
			if was, ok := prev[ps.TP]; ok && was != now {
				c := was + " -> " + now
				if hit[c] == nil {
					changes = append(changes, c)
				}
				hit[c] = append(hit[c], ps.TP.String())
			}
			prev[ps.TP] = now
		}
		for _, c := range changes {
			r.note("observed %s: %s", strings.Join(hit[c], ","), c)
		}
	}
}

package group

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the coordinator's groups on the broker's /metrics:
// each group's lag per partition, members, and groups per state. Values
// are read at scrape time from the loaded state.
type collector struct{ c *Coordinator }

var (
	lagDesc = prometheus.NewDesc("tidemark_group_lag",
		"High watermark minus the group's committed offset, per partition: the hosted replica's high watermark, or, for a partition this broker does not host, the one its leader reported last (refreshed every 15 s).",
		[]string{"group", "topic", "partition"}, nil)
	membersDesc = prometheus.NewDesc("tidemark_group_members",
		"Members of each group this broker coordinates.", []string{"group"}, nil)
	groupsDesc = prometheus.NewDesc("tidemark_groups",
		"Groups this broker coordinates, by state (groups with only committed offsets count as Empty).", []string{"state"}, nil)
	loadingDesc = prometheus.NewDesc("tidemark_group_coordinator_partitions",
		"__consumer_offsets partitions this broker coordinates, loaded or still loading.", []string{"status"}, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- membersDesc
	ch <- groupsDesc
	ch <- loadingDesc
}

func (m collector) Collect(ch chan<- prometheus.Metric) {
	type lagRow struct {
		group string
		tp    TP
		off   int64
	}
	var lags []lagRow
	members := map[string]int{}
	states := map[State]int{}
	loaded, loading := 0, 0
	c := m.c
	c.mu.Lock()
	for _, sh := range c.shards {
		if sh.loading {
			loading++
			continue
		}
		loaded++
		for id, g := range sh.groups {
			if g.State == Dead {
				continue
			}
			members[id] = g.Size()
			states[g.State]++
		}
		for id, offs := range sh.offsets {
			if _, ok := members[id]; !ok {
				members[id] = 0
				states[Empty]++
			}
			for tp, o := range offs {
				lags = append(lags, lagRow{id, tp, o.Offset})
			}
		}
	}
	c.mu.Unlock()
	for _, l := range lags {
		hw, ok := int64(0), false
		if po, local := c.host.LocalOffsets(l.tp); local {
			hw, ok = po.HighWatermark, true
		} else {
			hw, ok = c.remote.get(l.tp)
		}
		if ok {
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(max(hw-l.off, 0)),
				l.group, l.tp.Topic, strconv.Itoa(int(l.tp.Partition)))
		}
	}
	for id, n := range members {
		ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(n), id)
	}
	for st := Empty; st <= Stable; st++ {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(states[st]), st.String())
	}
	ch <- prometheus.MustNewConstMetric(loadingDesc, prometheus.GaugeValue, float64(loaded), "loaded")
	ch <- prometheus.MustNewConstMetric(loadingDesc, prometheus.GaugeValue, float64(loading), "loading")
}

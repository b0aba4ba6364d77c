package cli

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// newFaultCmd drives the brokers' fault-injection API, which brokers serve
// only when started with --fault.injection.enable (`tidemark dev up` starts
// them so). The gateway serves the same calls as /v1/brokers/{id}/faults
// and /v1/brokers/{id}/links/{to}:cut|:heal, which the console uses.
func newFaultCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "fault",
		Short: "Slow or stall a follower's fetching, cut the link between two brokers, or isolate a broker from etcd, the controllers and optionally the other brokers (brokers with --fault.injection.enable)",
	}
	c.AddCommand(newFaultFetchCmd(g, false), newFaultFetchCmd(g, true), newFaultLinkCmd(g, true), newFaultLinkCmd(g, false),
		newFaultIsolateCmd(g, true), newFaultIsolateCmd(g, false), newFaultListCmd(g), newFaultClearCmd(g))
	return c
}

// faultBrokers are the fault APIs of the cluster's live brokers, found in
// the controller's view of the cluster, and of the brokers it counts dead
// at a known address: an isolated broker whose registration lapsed is
// still there to be healed.
type faultBrokers struct {
	ids     []int32 // live brokers, in id order
	clients map[int32]faultv1.FaultInjectionServiceClient
	down    []int32 // known brokers that are not alive
	// lapsed are the down brokers with a known address.
	lapsed map[int32]faultv1.FaultInjectionServiceClient
	conns  []*grpc.ClientConn
}

func (f *faultBrokers) close() {
	for _, c := range f.conns {
		c.Close()
	}
}

// on returns broker id's client, or why there is none.
func (f *faultBrokers) on(id int32) (faultv1.FaultInjectionServiceClient, error) {
	if c, ok := f.clients[id]; ok {
		return c, nil
	}
	if slices.Contains(f.down, id) {
		return nil, kerr.New(kerr.BrokerNotAvailable, "broker %d is down", id)
	}
	return nil, kerr.New(kerr.BrokerNotAvailable, "broker %d is not in the cluster (brokers: %v)", id, slices.Concat(f.ids, f.down))
}

// onAny is on, or the client of a down broker at its last known address
// (healing an isolated broker).
func (f *faultBrokers) onAny(id int32) (faultv1.FaultInjectionServiceClient, error) {
	if c, ok := f.lapsed[id]; ok {
		return c, nil
	}
	return f.on(id)
}

// withFaults runs fn with the fault APIs of the cluster's live brokers.
func (g *globals) withFaults(cmd *cobra.Command, fn func(ctx context.Context, f *faultBrokers) error) error {
	return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
		cl, err := a.DescribeCluster(ctx)
		if err != nil {
			return err
		}
		dial, err := g.dialOption()
		if err != nil {
			return err
		}
		f := &faultBrokers{clients: map[int32]faultv1.FaultInjectionServiceClient{}, lapsed: map[int32]faultv1.FaultInjectionServiceClient{}}
		defer f.close()
		for _, b := range cl.GetBrokers() {
			id := b.GetNode().GetId()
			if !b.GetAlive() {
				f.down = append(f.down, id)
			}
			if b.GetNode().GetAddress() == "" {
				if b.GetAlive() {
					f.down = append(f.down, id)
				}
				continue
			}
			conn, err := grpc.NewClient(b.GetNode().GetAddress(), dial)
			if err != nil {
				return err
			}
			f.conns = append(f.conns, conn)
			if !b.GetAlive() {
				f.lapsed[id] = faultv1.NewFaultInjectionServiceClient(conn)
				continue
			}
			f.ids = append(f.ids, id)
			f.clients[id] = faultv1.NewFaultInjectionServiceClient(conn)
		}
		slices.Sort(f.ids)
		slices.Sort(f.down)
		return fn(ctx, f)
	})
}

// faultErr names the broker an error of its fault API came from.
func faultErr(id int32, err error) error {
	return fmt.Errorf("broker %d: %w", id, kerr.FromStatus(err))
}

// newFaultFetchCmd is `fault slow` (stall false) and `fault stall`.
func newFaultFetchCmd(g *globals, stall bool) *cobra.Command {
	var (
		id        int32
		topic     string
		partition int32
		delay     time.Duration
	)
	use, short := "slow --broker N --delay D [--topic T] [--partition P]",
		"Slow a follower: broker N waits D before each of its fetches of the matching partitions (a slow disk or network)"
	if stall {
		use, short = "stall --broker N [--topic T] [--partition P]",
			"Stall a follower: broker N stops fetching the matching partitions until the fault is cleared"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + ".\nAn empty --topic matches every topic and --partition -1 every partition; a fault for the same\n" +
			"topic and partition replaces the one before. The follower leaves the ISR once it has not caught up\n" +
			"with the leader for replica.lag.time.max.ms, and rejoins after `tidemark fault clear --broker N`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("broker") || id < 0 {
				return usagef("--broker is required (the follower's broker id)")
			}
			if err := checkPartitionFlag(partition); err != nil {
				return err
			}
			if !stall && (delay <= 0 || delay > math.MaxInt32*time.Millisecond) {
				return usagef("--delay must be a positive duration (at most %v), e.g. 500ms, got %v", math.MaxInt32*time.Millisecond, delay)
			}
			fault := &faultv1.FetchFault{Topic: topic, Partition: partition, Stall: stall, DelayMs: int32(delay / time.Millisecond)}
			return g.withFaults(cmd, func(ctx context.Context, f *faultBrokers) error {
				fc, err := f.on(id)
				if err != nil {
					return err
				}
				resp, err := fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{BrokerId: id, Fault: fault})
				if err != nil {
					return faultErr(id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "broker %d: %s\n", id, fetchFaultText(fault))
				if len(resp.GetFaults()) > 1 {
					fmt.Fprintf(cmd.OutOrStdout(), "broker %d's fetch faults now:\n", id)
					for _, x := range resp.GetFaults() {
						fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", fetchFaultText(x))
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Int32Var(&id, "broker", 0, "the follower's broker")
	f.StringVar(&topic, "topic", "", "the topic whose fetching is affected (empty: every topic)")
	f.Int32Var(&partition, "partition", -1, "the partition (-1: every partition of the topic)")
	if !stall {
		f.DurationVar(&delay, "delay", 0, "the wait before each fetch, e.g. 500ms (the console's and REST's delayMs)")
	}
	return cmd
}

func fetchFaultText(f *faultv1.FetchFault) string {
	what := "*"
	if f.GetTopic() != "" {
		what = f.GetTopic() + "-*"
		if f.GetPartition() >= 0 {
			what = fmt.Sprintf("%s-%d", f.GetTopic(), f.GetPartition())
		}
	} else if f.GetPartition() >= 0 {
		what = fmt.Sprintf("*-%d", f.GetPartition())
	}
	if f.GetStall() {
		return "fetches of " + what + " stalled"
	}
	return fmt.Sprintf("fetches of %s delayed %d ms", what, f.GetDelayMs())
}

func linkText(from, to int32) string { return fmt.Sprintf("link %d → %d", from, to) }

// newFaultLinkCmd is `fault cut` and `fault heal`.
func newFaultLinkCmd(g *globals, cut bool) *cobra.Command {
	var (
		from, to int32
		both     bool
	)
	use, short := "cut --from A --to B [--both]",
		"Cut the link from broker A to broker B: nothing A sends reaches B (--both: nor what B sends to A)"
	if !cut {
		use, short = "heal --from A --to B [--both]", "Heal the link from broker A to broker B (--both: and from B to A)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + ".\nThe cut is of replication traffic, one way, as a network that drops every packet from A to B:\n" +
			"A's fetches and epoch lookups as B's follower never arrive, and B's fetches from A arrive but\n" +
			"their answers do not come back (they are held until the link heals). Both brokers still reach\n" +
			"etcd, the controllers and the clients. So a follower on B of a partition A leads stops fetching\n" +
			"and, once writes leave it behind for replica.lag.time.max.ms, leaves the ISR while the leader\n" +
			"keeps the partition; after `tidemark fault heal` it catches up and rejoins.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("from") || !cmd.Flags().Changed("to") || from < 0 || to < 0 {
				return usagef("--from and --to are required (broker ids)")
			}
			if from == to {
				return usagef("--from and --to name the same broker (%d): a link joins two brokers", from)
			}
			links := [][2]int32{{from, to}}
			if both {
				links = append(links, [2]int32{to, from})
			}
			return g.withFaults(cmd, func(ctx context.Context, f *faultBrokers) error {
				for _, l := range links {
					fc, err := f.on(l[0])
					if err != nil {
						return err
					}
					if cut {
						_, err = fc.CutLink(ctx, &faultv1.CutLinkRequest{BrokerId: l[0], ToBrokerId: l[1]})
					} else {
						_, err = fc.HealLink(ctx, &faultv1.HealLinkRequest{BrokerId: l[0], ToBrokerId: l[1]})
					}
					if err != nil {
						return faultErr(l[0], err)
					}
					if cut {
						fmt.Fprintf(cmd.OutOrStdout(), "%s cut: nothing broker %d sends reaches broker %d\n", linkText(l[0], l[1]), l[0], l[1])
					} else {
						fmt.Fprintf(cmd.OutOrStdout(), "%s healed\n", linkText(l[0], l[1]))
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Int32Var(&from, "from", 0, "the broker whose sending is cut")
	f.Int32Var(&to, "to", 0, "the broker it cannot reach")
	f.BoolVar(&both, "both", false, "both ways: also from --to to --from")
	return cmd
}

// brokerFlagTargets are the brokers a list or clear acts on: the one
// --broker names (live, or down at a known address), or else the down ones
// at a known address (which may be isolated), to add to every live one.
func brokerFlagTargets(cmd *cobra.Command, f *faultBrokers, id int32) ([]int32, error) {
	if !cmd.Flags().Changed("broker") {
		return slices.Sorted(maps.Keys(f.lapsed)), nil
	}
	if _, err := f.onAny(id); err != nil {
		return nil, err
	}
	return []int32{id}, nil
}

// lapsedTimeout bounds a call to a broker the controller counts dead when
// no --broker named it: a paused process's address accepts and never
// answers.
const lapsedTimeout = 3 * time.Second

// eachTarget calls fn on each target broker, in id order; a down broker
// that does not answer is skipped (it is down indeed) unless --broker
// named it.
func eachTarget(ctx context.Context, cmd *cobra.Command, f *faultBrokers, id int32, fn func(ctx context.Context, id int32, fc faultv1.FaultInjectionServiceClient) error) error {
	ids, err := brokerFlagTargets(cmd, f, id)
	if err != nil {
		return err
	}
	named := cmd.Flags().Changed("broker")
	if !named {
		ids = slices.Sorted(slices.Values(slices.Concat(f.ids, ids)))
	}
	var skipped []int32
	for _, b := range ids {
		fc, _ := f.onAny(b)
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if !named && f.lapsed[b] != nil {
			cctx, cancel = context.WithTimeout(ctx, lapsedTimeout)
		}
		err := fn(cctx, b, fc)
		cancel()
		if err != nil && !named && f.lapsed[b] != nil && isUnreachable(err) {
			skipped = append(skipped, b)
			continue
		}
		if err != nil {
			return faultErr(b, err)
		}
	}
	if !named {
		for _, b := range f.down {
			if f.lapsed[b] == nil {
				skipped = append(skipped, b)
			}
		}
		if len(skipped) > 0 {
			slices.Sort(skipped)
			fmt.Fprintf(cmd.ErrOrStderr(), "brokers %v are down: skipped\n", skipped)
		}
	}
	return nil
}

// isUnreachable reports whether a call failed for want of an answer.
func isUnreachable(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}

func newFaultListCmd(g *globals) *cobra.Command {
	var id int32
	cmd := &cobra.Command{
		Use:   "list [--broker N]",
		Short: "List the faults in force on one broker, or on every live broker (and every isolated one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withFaults(cmd, func(ctx context.Context, f *faultBrokers) error {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
				fmt.Fprintln(tw, "BROKER\tFAULT")
				err := eachTarget(ctx, cmd, f, id, func(ctx context.Context, b int32, fc faultv1.FaultInjectionServiceClient) error {
					resp, err := fc.ListFaults(ctx, &faultv1.ListFaultsRequest{BrokerId: b})
					if err != nil {
						return err
					}
					if resp.GetIsolated() {
						fmt.Fprintf(tw, "%d\t%s\n", b, isolationDescription(resp.GetIsolatedFromPeers()))
					}
					for _, l := range resp.GetLinks() {
						fmt.Fprintf(tw, "%d\t%s cut\n", b, linkText(b, l.GetToBrokerId()))
					}
					for _, x := range resp.GetFaults() {
						fmt.Fprintf(tw, "%d\t%s\n", b, fetchFaultText(x))
					}
					return nil
				})
				if ferr := tw.Flush(); err == nil {
					err = ferr
				}
				return err
			})
		},
	}
	cmd.Flags().Int32Var(&id, "broker", 0, "only this broker")
	return cmd
}

func newFaultClearCmd(g *globals) *cobra.Command {
	var id int32
	cmd := &cobra.Command{
		Use:   "clear [--broker N]",
		Short: "Clear every fetch fault, heal every link cut and end the isolation on one broker, or on every live broker (and every isolated one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withFaults(cmd, func(ctx context.Context, f *faultBrokers) error {
				return eachTarget(ctx, cmd, f, id, func(ctx context.Context, b int32, fc faultv1.FaultInjectionServiceClient) error {
					if _, err := fc.ClearFaults(ctx, &faultv1.ClearFaultsRequest{BrokerId: b}); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "broker %d: faults cleared, links healed\n", b)
					return nil
				})
			})
		},
	}
	cmd.Flags().Int32Var(&id, "broker", 0, "only this broker")
	return cmd
}

// isolationDescription is how list shows an isolation, and isolate what it
// did.
func isolationDescription(peers bool) string {
	if peers {
		return "isolated from etcd, the controllers and the other brokers"
	}
	return "isolated from etcd and the controllers"
}

// newFaultIsolateCmd is `fault isolate` and `fault heal-isolation`.
func newFaultIsolateCmd(g *globals, isolate bool) *cobra.Command {
	var id int32
	var peers bool
	use, short := "isolate --broker N",
		"Isolate broker N from etcd and the controllers, and with --peers from the other brokers: its clients still reach it"
	if !isolate {
		use, short = "heal-isolation --broker N", "End broker N's isolation from etcd and the controllers"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + ".\nThe broker's connections to etcd and to the controllers stop carrying bytes, both ways, as on a\n" +
			"cut network: its lease keepalives, watches, controller session and ISR changes go nowhere, and the\n" +
			"controllers' requests to it are lost. Its registration lease runs out: shortly before, it fences\n" +
			"itself and refuses writes as leader; the controller elects new leaders with a higher leader epoch.\n" +
			"Once healed (`tidemark fault heal-isolation`, or `tidemark fault clear`) it registers again as a new\n" +
			"broker epoch, follows, truncates what only it wrote, and rejoins the ISR. With --peers it is cut off\n" +
			"from the other brokers too, for as long as the isolation lasts: it fetches from no leader, and the\n" +
			"other brokers' fetches and leader epoch lookups reach it only once healed, a full partition of the\n" +
			"node (its clients still reach it). The controller counts an isolated broker dead (its health probe\n" +
			"goes unanswered); these commands still find it at its last known address.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("broker") || id < 0 {
				return usagef("--broker is required (a broker id)")
			}
			return g.withFaults(cmd, func(ctx context.Context, f *faultBrokers) error {
				get := f.onAny
				if isolate {
					get = f.on
				}
				fc, err := get(id)
				if err != nil {
					return err
				}
				if isolate {
					_, err = fc.Isolate(ctx, &faultv1.IsolateRequest{BrokerId: id, Peers: peers})
				} else {
					_, err = fc.HealIsolation(ctx, &faultv1.HealIsolationRequest{BrokerId: id})
				}
				if err != nil {
					return faultErr(id, err)
				}
				if isolate {
					fmt.Fprintf(cmd.OutOrStdout(), "broker %d: %s\n", id, isolationDescription(peers))
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "broker %d: isolation healed\n", id)
				}
				return nil
			})
		},
	}
	cmd.Flags().Int32Var(&id, "broker", 0, "the broker")
	if isolate {
		cmd.Flags().BoolVar(&peers, "peers", false, "also cut its replication links to and from every other broker, both ways, until healed")
	}
	return cmd
}

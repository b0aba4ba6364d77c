package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/services/client"
	"tidemark.io/services/client/assign"
)

// The Groups view: every consumer group with its state, members,
// assignments and lag per partition. The page asks for it every few
// seconds (GET /console/api/groups) while the view is open; each answer is
// made fresh from the coordinators with the viewer's own identity.

const (
	groupsTimeout = 10 * time.Second
	maxGroups     = 100 // the view shows at most this many groups
)

type groupsView struct {
	Groups []groupView `json:"groups"`
	// More is how many groups were left out past maxGroups.
	More int `json:"more,omitempty"`
	// Error is set when some brokers could not list their groups.
	Error string `json:"error,omitempty"`
}

type groupView struct {
	ID         string            `json:"id"`
	State      string            `json:"state"`
	Protocol   string            `json:"protocol,omitempty"`
	Generation int32             `json:"generation"`
	Coord      int32             `json:"coordinator"`
	Members    []groupMemberView `json:"members"`
	Partitions []partitionLag    `json:"partitions"`
	TotalLag   int64             `json:"totalLag"`
	Error      string            `json:"error,omitempty"`
}

type groupMemberView struct {
	ID         string   `json:"id"`
	InstanceID string   `json:"instanceId,omitempty"`
	ClientID   string   `json:"clientId,omitempty"`
	Host       string   `json:"host,omitempty"`
	Assigned   []string `json:"assigned"`
}

type partitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: none
	HW        int64  `json:"hw"`        // -1: unknown
	Lag       int64  `json:"lag"`       // -1: unknown
	Member    string `json:"member,omitempty"`
}

func (c *Console) serveGroups(w http.ResponseWriter, r *http.Request) {
	user, _ := restauth.UserFrom(r.Context())
	c.mu.Lock()
	cl, err := c.clientForLocked(user)
	c.mu.Unlock()
	if err != nil {
		ae := toAPIError(err)
		writeError(w, ae.status, ae.body)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), groupsTimeout)
	defer cancel()
	v, err := groupsOf(ctx, cl)
	if err != nil {
		ae := toAPIError(err)
		writeError(w, ae.status, ae.body)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// groupsOf describes every group (up to maxGroups). A group that cannot be
// described is listed with its error; only a list that failed on every
// broker is an error.
func groupsOf(ctx context.Context, cl *client.Client) (groupsView, error) {
	listed, lerr := cl.ListGroups(ctx)
	if lerr != nil && len(listed) == 0 {
		return groupsView{}, lerr
	}
	v := groupsView{Groups: []groupView{}}
	if lerr != nil {
		v.Error = lerr.Error()
	}
	if len(listed) > maxGroups {
		v.More = len(listed) - maxGroups
		listed = listed[:maxGroups]
	}
	for _, lg := range listed {
		g := groupView{ID: lg.GetGroupId(), State: lg.GetGroupState(), Coord: lg.GetCoordinatorId(),
			Members: []groupMemberView{}, Partitions: []partitionLag{}}
		d, err := cl.DescribeGroup(ctx, g.ID)
		if err != nil {
			g.Error = err.Error()
			v.Groups = append(v.Groups, g)
			continue
		}
		g.State, g.Protocol, g.Generation = d.GetGroupState(), d.GetProtocolName(), d.GetGenerationId()
		for _, m := range d.GetMembers() {
			mv := groupMemberView{ID: m.GetMemberId(), InstanceID: m.GetGroupInstanceId(), ClientID: m.GetClientId(),
				Host: m.GetClientHost(), Assigned: []string{}}
			if d.GetProtocolType() == assign.ProtocolType {
				if a, err := assign.DecodeAssignment(m.GetMemberAssignment()); err == nil {
					for _, t := range a.Partitions {
						for _, p := range t.Partitions {
							mv.Assigned = append(mv.Assigned, fmt.Sprintf("%s-%d", t.Topic, p))
						}
					}
				}
			}
			g.Members = append(g.Members, mv)
		}
		lag, err := cl.GroupLag(ctx, g.ID)
		if err != nil {
			g.Error = err.Error()
		}
		for _, p := range lag.GetPartitions() {
			g.Partitions = append(g.Partitions, partitionLag{Topic: p.GetTopic(), Partition: p.GetPartition(),
				Committed: p.GetCommittedOffset(), HW: p.GetHighWatermark(), Lag: p.GetLag(), Member: p.GetMemberId()})
			if p.GetLag() > 0 {
				g.TotalLag += p.GetLag()
			}
		}
		v.Groups = append(v.Groups, g)
	}
	return v, nil
}

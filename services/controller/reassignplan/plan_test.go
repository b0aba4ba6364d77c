package reassignplan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGenerateKeepsShapeAndUsesOnlyTheListedBrokers(t *testing.T) {
	cur := map[string]map[int32][]int32{"a": {0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}}
	brokers := []Broker{{ID: 2, Rack: "r1"}, {ID: 3, Rack: "r2"}, {ID: 4, Rack: "r3"}}
	got, err := Generate(cur, brokers, true, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for p, reps := range got["a"] {
		if len(reps) != 3 {
			t.Errorf("partition %d: %v", p, reps)
		}
		for _, id := range reps {
			if id < 2 || id > 4 {
				t.Errorf("partition %d placed on broker %d", p, id)
			}
		}
		leaders[reps[0]]++
	}
	if len(leaders) != 3 {
		t.Errorf("leaders not spread: %v", leaders)
	}
	if _, err := Generate(cur, brokers[:2], true, rand.New(rand.NewPCG(1, 2))); err == nil {
		t.Error("replication factor 3 on 2 brokers was accepted")
	}
}

func TestMoveOffReplacesInPlacePreferringTheSameRack(t *testing.T) {
	cur := map[string]map[int32][]int32{"a": {0: {1, 2}, 1: {2, 3}, 2: {1, 3}}}
	live := []Broker{{ID: 1, Rack: "x"}, {ID: 2, Rack: "y"}, {ID: 3, Rack: "z"}, {ID: 4, Rack: "x"}, {ID: 5, Rack: "y"}}
	got, err := MoveOff(cur, live, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["a"][0], []int32{4, 2}) || !slices.Equal(got["a"][2], []int32{4, 3}) {
		t.Errorf("plan %v", got)
	}
	if _, ok := got["a"][1]; ok {
		t.Errorf("a partition without broker 1 is in the plan: %v", got)
	}
	if _, err := MoveOff(map[string]map[int32][]int32{"b": {0: {1, 2}}}, live[:2], 1); err == nil {
		t.Error("no replacement available, but no error")
	}
}

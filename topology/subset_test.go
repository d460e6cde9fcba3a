package topology

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TestFirstGPUsOfAClusterIsItsFirstNode: the first 8 GPUs of two DGX-like
// nodes are one node: the same nodes (the second node's switch and NICs
// pruned) and links as cluster:1x8 itself.
func TestFirstGPUsOfAClusterIsItsFirstNode(t *testing.T) {
	sub, err := FirstGPUs(mustParse(t, "cluster:2x8"), 8)
	if err != nil {
		t.Fatal(err)
	}
	one := mustParse(t, "cluster:1x8")
	if !reflect.DeepEqual(sub.Nodes, one.Nodes) || !reflect.DeepEqual(sub.Links, one.Links) {
		t.Errorf("first 8 GPUs of cluster:2x8:\n%v\n%v\nwant cluster:1x8's\n%v\n%v", sub.Nodes, sub.Links, one.Nodes, one.Links)
	}
	if sub.Name != "cluster:2x8 (first 8 GPUs)" {
		t.Errorf("name %q", sub.Name)
	}
}

func TestFirstGPUsPrunesWhatOnlyServedTheOthers(t *testing.T) {
	for _, c := range []struct {
		spec                 string
		n                    int
		gpus, switches, nics int
		links                int
	}{
		{"switch:8", 4, 4, 1, 0, 4},
		{"switch:8", 1, 1, 0, 0, 0}, // a switch with one GPU serves nothing
		{"ring:8", 4, 4, 0, 0, 3},   // the ring opens into a chain
		{"cluster:2x8", 4, 4, 2, 4, 12},
		{"cluster:2x8", 12, 12, 3, 12, 36},
	} {
		sub, err := FirstGPUs(mustParse(t, c.spec), c.n)
		if err != nil {
			t.Fatalf("%s first %d: %v", c.spec, c.n, err)
		}
		count := map[Kind]int{}
		for i, node := range sub.Nodes {
			count[node.Kind]++
			if node.Kind == GPU && i < c.n && node.Name != mustParse(t, c.spec).Nodes[i].Name {
				t.Errorf("%s first %d: GPU %d is %s", c.spec, c.n, i, node.Name)
			}
		}
		if sub.NumGPUs() != c.gpus || count[Switch] != c.switches || count[NIC] != c.nics || len(sub.Links) != c.links {
			t.Errorf("%s first %d: %d GPUs, %d switches, %d NICs, %d links; want %d, %d, %d, %d",
				c.spec, c.n, sub.NumGPUs(), count[Switch], count[NIC], len(sub.Links), c.gpus, c.switches, c.nics, c.links)
		}
	}
}

// TestPresetGPUsKeepsEachNodesFirstGPUs: a preset with gpus=G is its
// nodes with G GPUs each. On one node that is FirstGPUs exactly; on
// several, every node keeps G GPUs, each with its NIC, and no link or
// device changes its numbers.
func TestPresetGPUsKeepsEachNodesFirstGPUs(t *testing.T) {
	for _, c := range []struct {
		spec string
		g    int
	}{
		{"dgx-h100", 4}, {"hgx-b200", 2}, {"dgx-b200x1", 4}, {"dgx-h100x1", 2},
	} {
		first, err := FirstGPUs(mustParse(t, c.spec), c.g)
		if err != nil {
			t.Fatal(err)
		}
		sub := mustParse(t, fmt.Sprintf("%s,gpus=%d", c.spec, c.g))
		if !reflect.DeepEqual(sub.Nodes, first.Nodes) || !reflect.DeepEqual(sub.Links, first.Links) {
			t.Errorf("%s,gpus=%d is not its first %d GPUs:\n%v\n%v\nwant\n%v\n%v", c.spec, c.g, c.g, sub.Nodes, sub.Links, first.Nodes, first.Links)
		}
	}
	for _, c := range []struct {
		spec      string
		nodes, g  int
		rails     int
		wantLinks int
	}{
		{"dgx-h100x10", 10, 1, 0, 30}, // gpu-sw, gpu-nic, nic-netsw
		{"dgx-b200x2", 2, 4, 4, 28},   // and a rail-spine link a rail
		{"gb200-nvl72x2", 2, 36, 36, 252},
	} {
		full := mustParse(t, c.spec)
		sub := mustParse(t, fmt.Sprintf("%s,gpus=%d", c.spec, c.g))
		count := map[Kind]int{}
		for _, n := range sub.Nodes {
			count[n.Kind]++
		}
		switches := c.nodes + 1 // a switch a node and the network's
		if c.rails > 0 {
			switches = c.nodes + c.rails + 1 // its rails and the spine
		}
		if sub.NumGPUs() != c.nodes*c.g || count[NIC] != c.nodes*c.g || count[Switch] != switches || len(sub.Links) != c.wantLinks {
			t.Errorf("%s,gpus=%d: %d GPUs, %d NICs, %d switches, %d links; want %d, %d, %d, %d", c.spec, c.g,
				sub.NumGPUs(), count[NIC], count[Switch], len(sub.Links), c.nodes*c.g, c.nodes*c.g, switches, c.wantLinks)
		}
		// What each kept device and link is, the full preset has.
		kinds := map[string]bool{}
		for _, n := range full.Nodes {
			kinds[fmt.Sprint(n.Kind, n.Arch, n.ReduceBW)] = true
		}
		for _, n := range sub.Nodes {
			if !kinds[fmt.Sprint(n.Kind, n.Arch, n.ReduceBW)] {
				t.Errorf("%s,gpus=%d: %s is a %v (%v, reduce %g) the preset has not", c.spec, c.g, n.Name, n.Kind, n.Arch, n.ReduceBW)
			}
		}
		links := map[string]bool{}
		for _, l := range full.Links {
			links[fmt.Sprint(full.Nodes[l.A].Kind, full.Nodes[l.B].Kind, l.BW, l.Latency)] = true
		}
		for _, l := range sub.Links {
			if !links[fmt.Sprint(sub.Nodes[l.A].Kind, sub.Nodes[l.B].Kind, l.BW, l.Latency)] {
				t.Errorf("%s,gpus=%d: link %s-%s (%g B/s, %gs) is not one of the preset's", c.spec, c.g, sub.Nodes[l.A].Name, sub.Nodes[l.B].Name, l.BW, l.Latency)
			}
		}
	}
}

func TestFirstGPUsRefuses(t *testing.T) {
	topo := mustParse(t, "switch:8")
	if all, err := FirstGPUs(topo, 8); err != nil || all != topo {
		t.Errorf("all 8 GPUs: %v, %v; want the topology itself", all, err)
	}
	for _, n := range []int{0, -1, 9} {
		if _, err := FirstGPUs(topo, n); !errors.Is(err, ErrSpec) {
			t.Errorf("%d GPUs of 8: %v, want ErrSpec", n, err)
		}
	}
	// gpu1 reaches gpu0 only through gpu2.
	chain, err := New("chain", []Node{{Name: "gpu0", Kind: GPU, ReduceBW: 1}, {Name: "gpu1", Kind: GPU, ReduceBW: 1}, {Name: "gpu2", Kind: GPU, ReduceBW: 1}},
		[]Link{{A: 0, B: 2, BW: 1}, {A: 2, B: 1, BW: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FirstGPUs(chain, 2); !errors.Is(err, ErrInvalid) {
		t.Errorf("a subset that falls apart: %v, want ErrInvalid", err)
	}
	if _, err := FirstGPUs(&Topology{}, 1); !errors.Is(err, ErrSpec) {
		t.Errorf("an unbuilt topology: %v", err)
	}
}

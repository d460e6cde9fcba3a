package topology

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestReducingSwitchFindsTheNodesNVSwitch: a node's GPUs find their
// NVSwitch, with each member's edges up and down in the order given;
// GPUs of two nodes, a switch that does not reduce, a ring, no ranks,
// a rank out of range or twice are refused with ErrRoute and the reason.
func TestReducingSwitchFindsTheNodesNVSwitch(t *testing.T) {
	x2, err := Parse("dgx-h100x2")
	if err != nil {
		t.Fatal(err)
	}
	g, err := x2.ReducingSwitch([]int{9, 8, 15})
	if err != nil {
		t.Fatal(err)
	}
	if x2.Nodes[g.Switch].Name != "sw1" {
		t.Fatalf("node 1's GPUs reduce on %s, want sw1", x2.Nodes[g.Switch].Name)
	}
	for i, r := range []int{9, 8, 15} {
		from, to := x2.EdgeEnds(g.Up[i])
		back, forth := x2.EdgeEnds(g.Down[i])
		if from != x2.GPUs()[r] || to != g.Switch || back != g.Switch || forth != from {
			t.Errorf("member %d (rank %d): up %s, down %s", i, r, x2.EdgeName(g.Up[i]), x2.EdgeName(g.Down[i]))
		}
	}
	flat, _ := Parse("switch:4")
	ring, _ := Parse("ring:4")
	for _, tc := range []struct {
		name  string
		topo  *Topology
		ranks []int
		want  string
	}{
		{"two nodes", x2, []int{7, 8}, "in-network reduction"},
		{"a switch that does not reduce", flat, []int{0, 1}, "in-network reduction"},
		{"a ring", ring, []int{0, 1}, "in-network reduction"},
		{"no ranks", x2, nil, "no ranks"},
		{"out of range", x2, []int{0, 16}, "out of range"},
		{"twice", x2, []int{3, 3}, "twice"},
	} {
		if _, err := tc.topo.ReducingSwitch(tc.ranks); !errors.Is(err, ErrRoute) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrRoute saying %q", tc.name, err, tc.want)
		}
	}
}

// TestSwitchCostOfDGXH100: on dgx-h100 a switch reduction crosses two
// links of 468.125 ns and runs at the NVSwitch's 276 GB/s of results, a
// multicast at the links' 450 GB/s; nvls=inf leaves the links' rate.
func TestSwitchCostOfDGXH100(t *testing.T) {
	topo, err := Parse("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec   string
		reduce bool
		beta   float64
	}{
		{"dgx-h100", true, 1 / 276e9},
		{"dgx-h100", false, 1 / 450e9},
		{"dgx-h100,nvls=inf", true, 1 / 450e9},
	} {
		if tc.spec != "dgx-h100" {
			if topo, err = Parse(tc.spec); err != nil {
				t.Fatal(err)
			}
		}
		alpha, beta, err := topo.SwitchCost(3, 0, 8, tc.reduce)
		if err != nil || alpha != 2*468.125e-9 || math.Abs(beta-tc.beta) > 1e-12*tc.beta {
			t.Errorf("%s, reduce %v: α %v β %v (%v), want α %v β %v", tc.spec, tc.reduce, alpha, beta, err, 2*468.125e-9, tc.beta)
		}
	}
	if _, _, err := topo.SwitchCost(9, 0, 8, true); !errors.Is(err, ErrRoute) {
		t.Errorf("a rank outside its group: %v, want ErrRoute", err)
	}
	// Groups past the GPUs are refused before a rank list is made for
	// them (one of the largest int ranks panicked in make).
	for _, g := range [][3]int{{0, 0, math.MaxInt}, {math.MaxInt - 1, math.MaxInt - 1, 2}, {5, 4, 8}, {-1, -1, 2}} {
		if _, _, err := topo.SwitchCost(g[0], g[1], g[2], true); !errors.Is(err, ErrRoute) {
			t.Errorf("rank %d in the group of %d from %d: %v, want ErrRoute", g[0], g[2], g[1], err)
		}
	}
}

// TestSwitchGroupCostTakesTheSlowestWay: a reduction waits for the
// slowest member's way up and goes down to its rank; a multicast goes up
// from its rank and waits for the slowest way down; each runs at the
// narrowest link it crosses.
func TestSwitchGroupCostTakesTheSlowestWay(t *testing.T) {
	nodes := []Node{{Name: "sw", Kind: Switch, ReduceBW: math.Inf(1)}}
	var links []Link
	for i, l := range []struct{ bw, lat float64 }{{200e9, 1e-6}, {100e9, 3e-6}, {300e9, 2e-6}} {
		nodes = append(nodes, Node{Name: "gpu" + string(rune('0'+i)), Kind: GPU, ReduceBW: math.Inf(1)})
		links = append(links, Link{A: i + 1, B: 0, BW: l.bw, Latency: l.lat})
	}
	topo, err := New("t", nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	g, err := topo.ReducingSwitch([]int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		member      int
		reduce      bool
		alpha, beta float64
	}{
		{2, true, 3e-6 + 2e-6, 1 / 100e9}, // up from gpu1's 3 µs, down to gpu2
		{2, false, 2e-6 + 3e-6, 1 / 100e9},
		{0, false, 1e-6 + 3e-6, 1 / 100e9},
	} {
		alpha, beta := g.Cost(tc.member, tc.reduce)
		if math.Abs(alpha-tc.alpha) > 1e-18 || beta != tc.beta {
			t.Errorf("member %d, reduce %v: α %v β %v, want α %v β %v", tc.member, tc.reduce, alpha, beta, tc.alpha, tc.beta)
		}
	}
	// An all-reduce by all: the slowest way up and the slowest way down.
	if alpha, beta := g.AllReduceCost(); math.Abs(alpha-6e-6) > 1e-18 || beta != 1/100e9 {
		t.Errorf("all-reduce: α %v β %v, want α 6µs β 1/100 GB/s", alpha, beta)
	}
}

// TestReducingSwitchFindsTheSHARPSwitch: GPUs of different nodes, whose
// NVSwitches do not join them, find the network switch that reduces
// (sharp=) through their NICs: netsw on a flat network, their rail's
// switch on a rail-optimised one, with each member's edges between its
// NIC and the switch. A reduction's α is the slowest way up (PCIe hop
// and NIC link) plus the way down, its β the slower of the NIC links and
// the switch's reduction; without sharp= there is none.
func TestReducingSwitchFindsTheSHARPSwitch(t *testing.T) {
	flat, err := Parse("cluster:4x2,sharp=20GB/s,nicbw=50GB/s,niclat=2us,pcielat=1us,nvls=inf")
	if err != nil {
		t.Fatal(err)
	}
	ranks := []int{1, 3, 5, 7} // local GPU 1 of every node
	g, err := flat.ReducingSwitch(ranks)
	if err != nil {
		t.Fatal(err)
	}
	if flat.Nodes[g.Switch].Name != "netsw" || !g.Network {
		t.Fatalf("reduce on %s (network %v), want netsw", flat.Nodes[g.Switch].Name, g.Network)
	}
	for i, r := range ranks {
		from, to := flat.EdgeEnds(g.Up[i])
		if flat.Nodes[from].Name != "nic"+string(rune('0'+r)) || to != g.Switch || g.Down[i] != g.Up[i]^1 {
			t.Errorf("member %d (rank %d): up %s, down %s", i, r, flat.EdgeName(g.Up[i]), flat.EdgeName(g.Down[i]))
		}
	}
	alpha, beta := g.Cost(2, true)
	if alpha != 2*(1e-6+2e-6) || math.Abs(beta-1/20e9) > 1e-12/20e9 {
		t.Errorf("reduction: α %v β %v, want α 6µs β 1/20 GB/s", alpha, beta)
	}
	if alpha, beta = g.Cost(2, false); alpha != 2*(1e-6+2e-6) || math.Abs(beta-1/50e9) > 1e-12/50e9 {
		t.Errorf("multicast: α %v β %v, want α 6µs β 1/50 GB/s", alpha, beta)
	}
	if alpha, beta, err := flat.NetAllReduceCost(ranks); err != nil || alpha != 2*(1e-6+2e-6) || math.Abs(beta-1/20e9) > 1e-12/20e9 {
		t.Errorf("all-reduce: α %v β %v (%v), want α 6µs β 1/20 GB/s", alpha, beta, err)
	}
	if _, _, err := flat.NetAllReduceCost([]int{1, 1}); !errors.Is(err, ErrRoute) {
		t.Errorf("all-reduce by a rank twice: %v, want ErrRoute", err)
	}
	// One node's GPUs still reduce on their NVSwitch.
	if g, err := flat.ReducingSwitch([]int{2, 3}); err != nil || g.Network || flat.Nodes[g.Switch].Name != "sw1" {
		t.Errorf("node 1: %+v %v, want sw1", g, err)
	}
	rail, err := Parse("cluster:3x4,rail=true,sharp=inf")
	if err != nil {
		t.Fatal(err)
	}
	if g, err := rail.ReducingSwitch([]int{2, 6, 10}); err != nil || rail.Nodes[g.Switch].Name != "rail2" {
		t.Errorf("rail 2: %v, want rail2", err)
	}
	plain, _ := Parse("cluster:2x2")
	if _, err := plain.ReducingSwitch([]int{0, 2}); !errors.Is(err, ErrRoute) || !strings.Contains(err.Error(), "SHARP") {
		t.Errorf("no sharp: %v, want ErrRoute naming SHARP", err)
	}
}

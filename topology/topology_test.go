package topology

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

func gpu(name string) Node { return Node{Name: name, Kind: GPU, ReduceBW: math.Inf(1)} }
func sw(name string) Node  { return Node{Name: name, Kind: Switch} }

func TestNewValid(t *testing.T) {
	nodes := []Node{gpu("gpu0"), sw("sw0"), gpu("gpu1"), {Name: "cpu0", Kind: CPU}, {Name: "nic0", Kind: NIC}}
	links := []Link{{0, 1, 1e9, 0}, {2, 1, 1e9, 1e-6}, {3, 1, 2e9, 1}, {4, 3, 1e9, 0}}
	tp, err := New("x", nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.GPUs(); len(got) != 2 || got[0] != 0 || got[1] != 2 || tp.NumGPUs() != 2 {
		t.Errorf("GPUs() = %v", got)
	}
	if tp.NumEdges() != 8 || tp.EdgeBW(5) != 2e9 || tp.EdgeLatency(3) != 1e-6 {
		t.Errorf("edges: %d %v %v", tp.NumEdges(), tp.EdgeBW(5), tp.EdgeLatency(3))
	}
	if a, b := tp.EdgeEnds(3); a != 1 || b != 2 {
		t.Errorf("EdgeEnds(3) = %d, %d; want 1, 2", a, b)
	}
	if s := tp.EdgeName(6); s != "nic0->cpu0" {
		t.Errorf("EdgeName(6) = %q", s)
	}
	for _, e := range []int{-1, 8, math.MaxInt} {
		if tp.EdgeBW(e) != 0 || tp.EdgeLatency(e) != 0 {
			t.Errorf("edge %d out of range gives %v %v", e, tp.EdgeBW(e), tp.EdgeLatency(e))
		}
		if a, b := tp.EdgeEnds(e); a != -1 || b != -1 {
			t.Errorf("EdgeEnds(%d) = %d, %d", e, a, b)
		}
	}
	var nilT *Topology
	if nilT.NumGPUs() != 0 || nilT.GPUs() != nil || nilT.NumEdges() != 0 || nilT.EdgeBW(0) != 0 {
		t.Error("nil topology")
	}
	if _, err := nilT.Route(0, 1); !errors.Is(err, ErrRoute) {
		t.Errorf("nil Route: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	g0, g1, s0 := gpu("gpu0"), gpu("gpu1"), sw("sw0")
	ok := []Node{g0, s0}
	tests := []struct {
		name  string
		nodes []Node
		links []Link
		frag  string
	}{
		{"no gpu", []Node{s0}, nil, "no gpu among 1 nodes"},
		{"no nodes", nil, nil, "no gpu among 0 nodes"},
		{"empty name", []Node{g0, {Kind: Switch}}, []Link{{0, 1, 1, 0}}, "node 1: empty name"},
		{"duplicate", []Node{g0, s0, gpu("gpu0")}, []Link{{0, 1, 1, 0}, {2, 1, 1, 0}}, "node 2 (gpu0): duplicate name, already used by node 0"},
		{"two duplicates", []Node{gpu("b"), gpu("a"), gpu("a"), gpu("b")}, nil, "node 2 (a): duplicate name, already used by node 1"},
		{"unprintable", []Node{gpu("gpu\n0")}, nil, "unprintable character U+000A"},
		{"bad utf8", []Node{gpu("gpu\xff")}, nil, "not valid UTF-8"},
		{"long name", []Node{gpu(strings.Repeat("g", 2000))}, nil, "2000 bytes, more than the limit of 1024"},
		{"kind 0", []Node{g0, {Name: "x"}}, []Link{{0, 1, 1, 0}}, "node 1 (x): unknown kind 0"},
		{"reduce 0", []Node{{Name: "gpu0", Kind: GPU}}, nil, "node 0 (gpu0): gpu reduce bandwidth must be > 0 (or inf), got 0"},
		{"reduce NaN", []Node{{Name: "gpu0", Kind: GPU, ReduceBW: math.NaN()}}, nil, "got NaN"},
		{"reduce -1", []Node{{Name: "gpu0", Kind: GPU, ReduceBW: -1}}, nil, "got -1"},
		{"reduce on nic", []Node{g0, {Name: "nic0", Kind: NIC, ReduceBW: 5}}, nil, "node 1 (nic0): reduce bandwidth applies only to gpus and switches, got 5 on a nic"},
		{"reduce on cpu", []Node{g0, {Name: "c", Kind: CPU, ReduceBW: math.Inf(1)}}, nil, "node 1 (c): reduce bandwidth applies only to gpus and switches, got +Inf on a cpu"},
		{"switch reduce -1", []Node{g0, {Name: "sw0", Kind: Switch, ReduceBW: -1}}, nil, "node 1 (sw0): switch reduce bandwidth must be > 0 (or inf), or 0 for none, got -1"},
		{"switch reduce NaN", []Node{g0, {Name: "sw0", Kind: Switch, ReduceBW: math.NaN()}}, nil, "node 1 (sw0): switch reduce bandwidth must be > 0 (or inf), or 0 for none, got NaN"},
		{"arch 9", []Node{{Name: "gpu0", Kind: GPU, ReduceBW: 1, Arch: 9}}, nil, "node 0 (gpu0): unknown gpu arch 9"},
		{"arch on switch", []Node{g0, {Name: "sw0", Kind: Switch, Arch: Hopper}}, nil, "node 1 (sw0): arch applies only to gpus, got hopper on a switch"},
		{"endpoint", ok, []Link{{0, 7, 1, 0}}, "link 0 (gpu0-#7): endpoint out of range: a=0 b=7, nodes are 0..1"},
		{"negative endpoint", ok, []Link{{-1, 1, 1, 0}}, "link 0 (#-1-sw0): endpoint out of range"},
		{"self loop", ok, []Link{{1, 1, 1, 0}}, "link 0 (sw0-sw0): self-loop on node 1"},
		{"bw -5", ok, []Link{{0, 1, -5, 0}}, "link 0 (gpu0-sw0): bandwidth must be > 0 and finite, got -5"},
		{"bw 0", ok, []Link{{0, 1, 0, 0}}, "got 0"},
		{"bw inf", ok, []Link{{0, 1, math.Inf(1), 0}}, "got +Inf (inf is for a node's reduction bandwidth, reduce:, not a link's rate)"},
		{"bw nan", ok, []Link{{0, 1, math.NaN(), 0}}, "got NaN"},
		{"lat -1", ok, []Link{{0, 1, 1, -1}}, "link 0 (gpu0-sw0): latency must be between 0 and 1s, got -1"},
		{"lat nan", ok, []Link{{0, 1, 1, math.NaN()}}, "got NaN"},
		{"lat inf", ok, []Link{{0, 1, 1, math.Inf(1)}}, "got +Inf"},
		{"lat 2", ok, []Link{{0, 1, 1, 2}}, "got 2"},
		{"parallel", []Node{g0, s0, g1}, []Link{{0, 1, 1, 0}, {2, 1, 1, 0}, {1, 0, 1, 0}}, "link 2 (sw0-gpu0): parallel to link 0 between the same nodes"},
		{"disconnected", []Node{g0, s0, g1, sw("sw1")}, []Link{{0, 1, 1, 0}, {2, 3, 1, 0}}, "disconnected: node 2 (gpu1) is not reachable from gpu0 (node 0)"},
		{"isolated", []Node{s0, g0, g1}, []Link{{1, 2, 1, 0}}, "node 0 (sw0) is not reachable from gpu0 (node 1)"},
		{"name", []Node{g0}, nil, "topology name"},
	}
	for _, tc := range tests {
		name := "ok"
		if tc.name == "name" {
			name = "bad\x00name"
		}
		_, err := New(name, tc.nodes, tc.links)
		if err == nil {
			t.Errorf("%s: no error, want %q", tc.name, tc.frag)
			continue
		}
		if !strings.Contains(err.Error(), tc.frag) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error\n  %v\nwant fragment %q and ErrInvalid", tc.name, err, tc.frag)
		}
	}
}

func TestNewLimits(t *testing.T) {
	_, err := New("big", make([]Node, MaxNodes+1), nil)
	if err == nil || !strings.Contains(err.Error(), "1048577 nodes is more than the limit of 1048576") {
		t.Errorf("too many nodes: %v", err)
	}
	_, err = New("big", []Node{gpu("g")}, make([]Link, MaxLinks+1))
	if err == nil || !strings.Contains(err.Error(), "4194305 links is more than the limit of 4194304") {
		t.Errorf("too many links: %v", err)
	}
}

// TestMemoryPerGPU checks that a 16384-GPU switch stays well under 2 KB per
// GPU once built (see BenchmarkBuildSwitch16384 for the figures).
func TestMemoryPerGPU(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures the heap")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tp, err := Parse("switch:16384")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perGPU := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / 16384
	runtime.KeepAlive(tp)
	t.Logf("switch:16384 retains %.0f bytes per GPU", perGPU)
	if perGPU > 512 {
		t.Errorf("switch:16384 retains %.0f bytes per GPU, want < 512", perGPU)
	}
}

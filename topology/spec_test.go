package topology

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// linkCheck names one link to inspect: its endpoints by name, bw and lat.
type linkCheck struct {
	i       int
	a, b    string
	bw, lat float64
}

func checkLink(t *testing.T, tp *Topology, c linkCheck) {
	t.Helper()
	if c.i >= len(tp.Links) {
		t.Errorf("%s: no link %d (have %d)", tp.Name, c.i, len(tp.Links))
		return
	}
	l := tp.Links[c.i]
	if a, b := tp.Nodes[l.A].Name, tp.Nodes[l.B].Name; a != c.a || b != c.b {
		t.Errorf("%s: link %d is %s-%s, want %s-%s", tp.Name, c.i, a, b, c.a, c.b)
	}
	if l.BW != c.bw || l.Latency != c.lat {
		t.Errorf("%s: link %d bw=%v lat=%v, want bw=%v lat=%v", tp.Name, c.i, l.BW, l.Latency, c.bw, c.lat)
	}
}

func TestParseKinds(t *testing.T) {
	tests := []struct {
		spec          string
		nodes, links  int
		gpus          int
		check         []linkCheck
		switches, nic int
	}{
		{"ring:8", 8, 8, 8, []linkCheck{{0, "gpu0", "gpu1", 100e9, 1e-6}, {7, "gpu7", "gpu0", 100e9, 1e-6}}, 0, 0},
		{"ring:1", 1, 0, 1, nil, 0, 0},
		{"ring:2", 2, 1, 2, []linkCheck{{0, "gpu0", "gpu1", 100e9, 1e-6}}, 0, 0},
		{"ring:3", 3, 3, 3, []linkCheck{{2, "gpu2", "gpu0", 100e9, 1e-6}}, 0, 0},
		{"mesh:4", 4, 6, 4, []linkCheck{{0, "gpu0", "gpu1", 100e9, 1e-6}, {5, "gpu2", "gpu3", 100e9, 1e-6}}, 0, 0},
		{"mesh:1", 1, 0, 1, nil, 0, 0},
		{"switch:4", 5, 4, 4, []linkCheck{{3, "gpu3", "sw0", 100e9, 1e-6}}, 1, 0},
		{"switch:1", 2, 1, 1, []linkCheck{{0, "gpu0", "sw0", 100e9, 1e-6}}, 1, 0},
		{"torus:4x4", 16, 32, 16, []linkCheck{{0, "gpu0", "gpu1", 100e9, 1e-6}, {1, "gpu0", "gpu4", 100e9, 1e-6}, {6, "gpu3", "gpu0", 100e9, 1e-6}}, 0, 0},
		{"torus:2x3", 6, 9, 6, []linkCheck{{0, "gpu0", "gpu1", 100e9, 1e-6}, {1, "gpu0", "gpu3", 100e9, 1e-6}}, 0, 0},
		{"torus:2x2", 4, 4, 4, nil, 0, 0},
		{"torus:1x5", 5, 5, 5, []linkCheck{{4, "gpu4", "gpu0", 100e9, 1e-6}}, 0, 0},
		{"torus:3x3x3", 27, 81, 27, []linkCheck{{0, "gpu0", "gpu1", 100e9, 1e-6}, {1, "gpu0", "gpu3", 100e9, 1e-6}, {2, "gpu0", "gpu9", 100e9, 1e-6}}, 0, 0},
		{"torus:1x1", 1, 0, 1, nil, 0, 0},
		{"torus:4X2x1", 8, 12, 8, nil, 0, 0},
		{"cluster:2x4", 19, 24, 8, []linkCheck{
			{0, "gpu0", "sw0", 100e9, 1e-6}, {7, "gpu7", "sw1", 100e9, 1e-6},
			{8, "gpu0", "nic0", 64e9, 0}, {16, "nic0", "netsw", 50e9, 2e-6}, {23, "nic7", "netsw", 50e9, 2e-6},
		}, 3, 8},
		{"cluster:2x4,rail=true", 23, 28, 8, []linkCheck{
			{16, "nic0", "rail0", 50e9, 2e-6}, {21, "nic5", "rail1", 50e9, 2e-6}, {27, "rail3", "spine", 100e9, 2e-6},
		}, 7, 8},
		{"cluster:1x1", 4, 3, 1, nil, 2, 1},
	}
	for _, tc := range tests {
		tp, err := Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if tp.Name != tc.spec {
			t.Errorf("Parse(%q).Name = %q", tc.spec, tp.Name)
		}
		if len(tp.Nodes) != tc.nodes || len(tp.Links) != tc.links || tp.NumGPUs() != tc.gpus {
			t.Errorf("Parse(%q): %d nodes, %d links, %d gpus; want %d, %d, %d", tc.spec,
				len(tp.Nodes), len(tp.Links), tp.NumGPUs(), tc.nodes, tc.links, tc.gpus)
		}
		var sw, nic int
		for i, n := range tp.Nodes {
			switch n.Kind {
			case Switch:
				sw++
			case NIC:
				nic++
			case GPU:
				if !math.IsInf(n.ReduceBW, 1) {
					t.Errorf("Parse(%q): node %d reduce %v, want inf", tc.spec, i, n.ReduceBW)
				}
			}
		}
		if sw != tc.switches || nic != tc.nic {
			t.Errorf("Parse(%q): %d switches, %d nics; want %d, %d", tc.spec, sw, nic, tc.switches, tc.nic)
		}
		for r, v := range tp.GPUs() {
			if tp.Nodes[v].Kind != GPU || tp.Nodes[v].Name != "gpu"+itoa(r) {
				t.Errorf("Parse(%q): rank %d is node %d (%s)", tc.spec, r, v, tp.Nodes[v].Name)
			}
		}
		for _, c := range tc.check {
			checkLink(t, tp, c)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestTorusDegree(t *testing.T) {
	// Every GPU of a torus with all sizes > 2 has degree 2 × dims.
	tp, err := Parse("torus:3x4x5")
	if err != nil {
		t.Fatal(err)
	}
	for v := range tp.Nodes {
		if d := tp.degree(int64(v)); d != 6 {
			t.Fatalf("gpu%d has degree %d, want 6", v, d)
		}
	}
}

func TestParseOverrides(t *testing.T) {
	tp, err := Parse(" Ring:4 , bw = 400Gb/s ,lat=500ns,reduce=1.5TB/s ")
	if err != nil {
		t.Fatal(err)
	}
	checkLink(t, tp, linkCheck{3, "gpu3", "gpu0", 50e9, 500e-9})
	if tp.Nodes[0].ReduceBW != 1.5e12 {
		t.Errorf("reduce = %v", tp.Nodes[0].ReduceBW)
	}
	if tp.Name != "Ring:4 , bw = 400Gb/s ,lat=500ns,reduce=1.5TB/s" {
		t.Errorf("name %q", tp.Name)
	}

	tp, err = Parse("cluster:2x2,nicbw=25GB/s,niclat=3us,pciebw=32GB/s,pcielat=100ns,bw=200GB/s,lat=0,reduce=inf")
	if err != nil {
		t.Fatal(err)
	}
	checkLink(t, tp, linkCheck{0, "gpu0", "sw0", 200e9, 0})
	checkLink(t, tp, linkCheck{4, "gpu0", "nic0", 32e9, 100e-9})
	checkLink(t, tp, linkCheck{8, "nic0", "netsw", 25e9, 3e-6})

	tp, err = Parse("cluster:3x2,rail=1,nicbw=10GB/s")
	if err != nil {
		t.Fatal(err)
	}
	checkLink(t, tp, linkCheck{len(tp.Links) - 1, "rail1", "spine", 30e9, 2e-6})

	tp, err = Parse("dgx-h100x2,nicbw=25GB/s,rail=true,lat=1us")
	if err != nil {
		t.Fatal(err)
	}
	checkLink(t, tp, linkCheck{0, "gpu0", "sw0", 450e9, 1e-6})
	checkLink(t, tp, linkCheck{len(tp.Links) - 1, "rail7", "spine", 50e9, 7e-6})

	// nicports changes no link: it says how many ports a NIC link stands
	// for, and a subset keeps it.
	tp, err = Parse("dgx-a100x2,nicbw=200Gb/s,nicports=2")
	if err != nil {
		t.Fatal(err)
	}
	checkLink(t, tp, linkCheck{len(tp.Links) - 1, "rail7", "spine", 50e9, 7e-6})
	if sub, err := FirstGPUs(tp, 12); err != nil || tp.NICPorts != 2 || sub.NICPorts != 2 {
		t.Errorf("nicports=2: %d ports, subset %v (%v)", tp.NICPorts, sub, err)
	}

	tp, err = Parse("mac-tb5:3,bw=5GB/s")
	if err != nil {
		t.Fatal(err)
	}
	checkLink(t, tp, linkCheck{2, "gpu2", "gpu0", 5e9, 10e-6})
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ spec, frag string }{
		{"", "empty spec"},
		{"   ", "empty spec"},
		{"ring", "ring needs a shape"},
		{"ring:", "ring needs a shape"},
		{"ring:0", "ring size must be >= 1, got 0"},
		{"ring:-1", `ring size "-1" is not a whole number`},
		{"ring:abc", `ring size "abc" is not a whole number`},
		{"ring:+3", `is not a whole number`},
		{"ring:99999999999999999999999", "ring size 99999999999999999999999 is more than the limit of 1048576 nodes"},
		{"switch:1048576", "switch:1048576 needs 1048577 nodes, more than the limit of 1048576"},
		{"mesh:5000", "mesh:5000 needs 12497500 links, more than the limit of 4194304"},
		{"torus:4", "want torus:4x4"},
		{"torus:2x2x2x2", "want torus:4x4"},
		{"torus:4x0", "torus dimension must be >= 1, got 0"},
		{"torus:4xx4", "torus dimension is empty"},
		{"torus:1024x1024x2", "more than the limit of 1048576 nodes"},
		{"cluster:4", "cluster:4x8"},
		{"cluster:0x8", "cluster dimension must be >= 1"},
		{"cluster:1024x1024", "more than the limit"},
		{"cluster:524288x1", "needs 1572865 nodes"},
		{"foo:3", `unknown kind "foo"`},
		{"ring:4,foo=1", `unknown key "foo" (ring takes bw, lat, reduce, arch, cpu)`},
		{"ring:4,nvls=1TB/s", `key "nvls" does not apply to ring`},
		{"switch:4,sharp=1TB/s", `key "sharp" does not apply to switch`},
		{"dgx-h100,sharp=50GB/s", `key "sharp" does not apply to dgx-h100`},
		{"mac-tb5:2,nvls=off", `key "nvls" does not apply to mac-tb5`},
		{"ring:4,arch=pascal", `key arch="pascal": unknown gpu arch "pascal" (want volta, ampere, hopper, blackwell or unknown)`},
		{"ring:4,cpu=power", `key cpu="power": unknown cpu vendor "power" (want intel, amd, arm or unknown)`},
		{"switch:4,nvls=0", `key nvls="0": nvls takes a bandwidth, inf or off: bandwidth "0": must be > 0`},
		{"switch:4,nvls=-1GB/s", `nvls takes a bandwidth, inf or off: bandwidth "-1GB/s": must be > 0`},
		{"cluster:2x2,sharp=fast", `key sharp="fast": sharp takes a bandwidth, inf or off`},
		{"dgx-b200x0", "dgx-b200xN node count must be >= 1"},
		{"gb200-nvl72x", "gb200-nvl72xN node count is empty"},
		{"hgx-h200x2:2", "preset hgx-h200xN takes no :shape"},
		{"hgx-b200:8", "preset hgx-b200 takes no shape"},
		{"dgx-a100x2,arch=volta,arch=ampere", `key "arch" given twice`},
		{"cluster:2x2,nicports=0", "nicports must be a whole number from 1 to 16"},
		{"cluster:2x2,nicports=1.5", "nicports must be a whole number from 1 to 16"},
		{"switch:4,nicports=2", `key "nicports" does not apply to switch`},
		{"dgx-h100x2,gpus=9", "gpus=9, but a node has 8 GPUs"},
		{"hgx-b200,gpus=0", "gpus must be a whole number of GPUs a node, at least 1"},
		{"dgx-a100x2,gpus=half", "gpus must be a whole number of GPUs a node, at least 1"},
		{"dgx-h100,gpus=99999999999999999999", "gpus must be a whole number of GPUs a node, at least 1"},
		{"cluster:2x4,gpus=1", `key "gpus" does not apply to cluster`},
		{"switch:8,gpus=4", `key "gpus" does not apply to switch`},
		{"h200-virtual:4,gpus=1", `key "gpus" does not apply to h200-virtual`},
		{"ring:4,nicbw=1GB/s", `key "nicbw" does not apply to ring`},
		{"torus:2x2,rail=true", `key "rail" does not apply to torus`},
		{"ring:4,bw", `override "bw": want key=value`},
		{"ring:4,", `override "": want key=value`},
		{"ring:4,=5", `want key=value`},
		{"ring:4,bw=fast", `key bw="fast"`},
		{"ring:4,bw=0GB/s", "must be > 0"},
		{"ring:4,bw=-5GB/s", `key bw="-5GB/s": bandwidth "-5GB/s": must be > 0`},
		{"ring:4,bw=inf", "bw must be finite"},
		{"cluster:2x2,nicbw=inf", "nicbw must be finite"},
		{"ring:4,bw=1GB/s,bw=2GB/s", `key "bw" given twice`},
		{"ring:4,lat=2s", "lat 2s is more than the limit of 1s"},
		{"ring:4,lat=5", "missing unit"},
		{"ring:4,lat=-1us", "must be >= 0"},
		{"ring:4,reduce=0B/s", "must be > 0"},
		{"cluster:2x2,rail=maybe", "rail must be true or false"},
		{"cluster:2x2,nicbw=1e308TB/s", "too large"},
		{"cluster:2x2,rail=true,nicbw=1e308B/s", "link 12 (rail0-spine): bandwidth must be > 0 and finite, got +Inf"},
		{"dgx-a100:4", "preset dgx-a100 takes no shape"},
		{"dgx-a100,nicbw=1GB/s", `key "nicbw" does not apply to dgx-a100`},
		{"mac-tb5", "preset mac-tb5:N needs a size"},
		{"mac-tb5:0", "mac-tb5 size must be >= 1"},
		{"dgx-h100x0", "dgx-h100xN node count must be >= 1"},
		{"dgx-h100x", "dgx-h100xN node count is empty"},
		{"dgx-h100xy", `"y" is not a whole number`},
		{"dgx-h100:2", "preset dgx-h100 takes no shape"},
		{"dgx-h100x2:3", "takes no :shape"},
		{"dgx-h100x131072", "more than the limit"},
		{"ring:4" + strings.Repeat(" ", 5000), "more than the limit of 4096"},
	}
	for _, tc := range tests {
		tp, err := Parse(tc.spec)
		if err == nil {
			t.Errorf("Parse(%q): no error (%d nodes), want %q", tc.spec, len(tp.Nodes), tc.frag)
			continue
		}
		if !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("Parse(%q) error:\n  %v\nwant fragment %q", tc.spec, err, tc.frag)
		}
		if !errors.Is(err, ErrSpec) {
			t.Errorf("Parse(%q) error does not wrap ErrSpec: %v", tc.spec, err)
		}
		if !strings.HasPrefix(err.Error(), "topology: ") || strings.Count(err.Error(), "topology:") != 1 {
			t.Errorf("Parse(%q) error should start with one \"topology: \": %v", tc.spec, err)
		}
	}
}

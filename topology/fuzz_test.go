package topology

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// checkBuilt checks the invariants of a topology that was accepted: it
// validates again from its own parts, routes between its first and last
// ranks, and survives a YAML round trip (skipped for big fabrics, to keep
// the fuzzer fast).
func checkBuilt(t *testing.T, tp *Topology) {
	t.Helper()
	again, err := New(tp.Name, tp.Nodes, tp.Links)
	if err != nil {
		t.Fatalf("accepted topology does not validate again: %v", err)
	}
	if again.NumGPUs() < 1 || again.NumGPUs() != tp.NumGPUs() {
		t.Fatalf("gpus: %d vs %d", again.NumGPUs(), tp.NumGPUs())
	}
	if len(tp.Nodes)+len(tp.Links) > 5000 {
		return
	}
	last := tp.NumGPUs() - 1
	for _, pair := range [][2]int{{0, last}, {last, 0}} {
		p, err := tp.RouteRanks(pair[0], pair[1])
		if err != nil {
			t.Fatalf("route %v: %v", pair, err)
		}
		if pair[0] != pair[1] && len(p.Edges) == 0 {
			t.Fatalf("route %v is empty", pair)
		}
	}
	roundTrip(t, tp)
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrSpec) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrYAML) {
		t.Fatalf("error wraps no sentinel: %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "topology: ") || strings.Contains(msg, "internal error") {
		t.Fatalf("bad error: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"ring:8", "ring:1", "ring:2", "mesh:4,lat=0", "switch:16,bw=400Gb/s", "torus:4x4", "torus:2x3x4",
		"cluster:2x4", "cluster:2x4,rail=true,nicbw=25GB/s,niclat=1.5µs,pciebw=32GiB/s,pcielat=0",
		"dgx-a100", "dgx-h100", "hgx-h200", "dgx-h100x2", "dgx-h100x2,rail=true", "gb200-nvl72", "mac-tb5:3",
		"ring:4,reduce=inf", "ring:4,reduce=1.43TB/s,lat=936.25ns",
		"", "ring", "ring:0", "ring:-1", "mesh:5000", "torus:4", "torus:0x4", "cluster:4", "foo:3",
		"ring:4,foo=1", "ring:4,nicbw=1GB/s", "ring:4,bw=inf", "ring:4,bw=-5GB/s", "ring:4,bw=1e400GB/s",
		"ring:4,lat=2s", "ring:4,bw=1GB/s,bw=1GB/s", "dgx-a100:3", "dgx-h100x", "mac-tb5",
		"cluster:2x2,rail=true,nicbw=1e308B/s", "ring:3,lat=1e-400s", "ring:3,bw=5e-324B/s",
		"hgx-b200", "dgx-b200x2", "hgx-h200x2", "dgx-a100x2,rail=false", "gb200-nvl72x1",
		"switch:4,nvls=inf,arch=hopper,cpu=intel", "cluster:2x2,sharp=off,nvls=off", "dgx-h100,nvls=0",
		"ring:2,arch=sm90", "cluster:2x2,cpu=", "switch:2,nvls=1e-400GB/s",
		"dgx-h100x10,gpus=1", "dgx-h100,gpus=4", "gb200-nvl72x2,gpus=9,rail=false", "dgx-b200x2,gpus=9", "hgx-b200,gpus=-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		tp, err := Parse(spec)
		if err != nil {
			if tp != nil {
				t.Fatal("topology and error")
			}
			checkErr(t, err)
			return
		}
		checkBuilt(t, tp)
	})
}

func FuzzReadYAML(f *testing.F) {
	for _, s := range []string{"ring:3", "switch:2", "cluster:2x2,rail=true", "dgx-a100", "mesh:3,lat=0,bw=46.5GB/s",
		"dgx-h100", "cluster:1x2,rail=true,arch=blackwell,cpu=arm,nvls=482GB/s,sharp=inf"} {
		var buf bytes.Buffer
		if err := mustParse(f, s).WriteYAML(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	for _, s := range []string{
		"", "name: x\n", "nodes: [{name: g, kind: gpu}]\n",
		"nodes: [{name: g, kind: gpu, reduce: 1TB/s}, {name: s, kind: switch}]\nlinks: [{a: g, b: s, bw: 1GB/s, lat: 1us}]\n",
		"nodes: [{name: g, kind: gpu}, {name: g, kind: gpu}]\n",
		"nodes: [{name: g, kind: gpu}]\nlinks: [{a: g, b: x, bw: 1GB/s, lat: 0}]\n",
		"nodes: [{name: g, kind: gpu}, {name: h, kind: gpu}]\nlinks: [{a: g, b: h, bw: -1GB/s, lat: 0}]\n",
		"nodes: [{name: g, kind: gpu}, {name: h, kind: gpu}]\n",
		"nodes: [{name: g, kind: gpu, color: red}]\n",
		"nodes: [{name: &a g, kind: gpu}, {name: *a, kind: gpu}]\n",
		"a: &x [*x]\n", "nodes: !!binary Z3B1MA==\n", "---\n---\n", "{", "[", "- - - -\n",
		"nodes: [{name: 'null', kind: gpu}, {name: '~', kind: cpu}]\nlinks: [{a: 'null', b: '~', bw: 1B/s, lat: 1e-15s}]\n",
		"cpu: amd\nnodes: [{name: g, kind: gpu, arch: ampere}, {name: s, kind: switch, reduce: 5e-324B/s}]\nlinks: [{a: g, b: s, bw: 1GB/s, lat: 0}]\n",
		"cpu: [x]\nnodes: [{name: g, kind: gpu, arch: volta}]\n", "nodes: [{name: g, kind: nic, arch: hopper}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The line reader, where it applies, reads as the library does.
		sameReading(t, "fuzz input", data)
		tp, err := ReadYAML(data)
		if err != nil {
			if tp != nil {
				t.Fatal("topology and error")
			}
			checkErr(t, err)
			return
		}
		checkBuilt(t, tp)
	})
}

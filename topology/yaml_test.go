package topology

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameTopology reports whether a and b have equal Name, HostCPU, NICPorts,
// Nodes and Links, comparing floats bit for bit.
func sameTopology(a, b *Topology) bool {
	if a.Name != b.Name || a.HostCPU != b.HostCPU || max(1, a.NICPorts) != max(1, b.NICPorts) || len(a.Nodes) != len(b.Nodes) || len(a.Links) != len(b.Links) {
		return false
	}
	for i := range a.Nodes {
		x, y := a.Nodes[i], b.Nodes[i]
		if x.Name != y.Name || x.Kind != y.Kind || x.Arch != y.Arch || math.Float64bits(x.ReduceBW) != math.Float64bits(y.ReduceBW) {
			return false
		}
	}
	for i := range a.Links {
		x, y := a.Links[i], b.Links[i]
		if x.A != y.A || x.B != y.B || math.Float64bits(x.BW) != math.Float64bits(y.BW) ||
			math.Float64bits(x.Latency) != math.Float64bits(y.Latency) {
			return false
		}
	}
	return true
}

// roundTrip exports tp, reads it back, and checks the result is identical
// and exports to the same bytes.
func roundTrip(t testing.TB, tp *Topology) {
	t.Helper()
	var buf bytes.Buffer
	if err := tp.WriteYAML(&buf); err != nil {
		t.Fatalf("%q: WriteYAML: %v", tp.Name, err)
	}
	back, err := ReadYAML(buf.Bytes())
	if err != nil {
		t.Fatalf("%q: ReadYAML of the export: %v\n%s", tp.Name, err, buf.String())
	}
	if tp.Name != back.Name || tp.HostCPU != back.HostCPU || !reflect.DeepEqual(tp.Nodes, back.Nodes) || !reflect.DeepEqual(tp.Links, back.Links) || !sameTopology(tp, back) {
		t.Fatalf("%q: export and load differ\n%s", tp.Name, buf.String())
	}
	var again bytes.Buffer
	if err := back.WriteYAML(&again); err != nil || !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatalf("%q: second export differs (%v)", tp.Name, err)
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	specs := []string{
		"ring:1", "ring:2", "ring:8", "ring:5,bw=46.5GB/s,lat=936.25ns,reduce=1.4TB/s",
		"mesh:5", "mesh:3,lat=0", "switch:16", "switch:3,bw=400Gb/s,reduce=4.3TB/s",
		"torus:4x4", "torus:2x3x4", "torus:1x1",
		"cluster:2x4", "cluster:3x2,rail=true,nicbw=12.5GB/s,niclat=1.3us,pciebw=32GB/s,pcielat=0.1us",
		"dgx-a100", "dgx-h100", "hgx-h200", "dgx-h100x1", "dgx-h100x4", "dgx-h100x2,rail=true",
		"gb200-nvl72", "mac-tb5:1", "mac-tb5:2", "mac-tb5:5",
		"switch:4,arch=volta,cpu=intel,nvls=5e-324B/s", "switch:2,nvls=inf,cpu=arm", "ring:3,arch=hopper",
		"cluster:2x2,rail=true,sharp=400Gb/s,nvls=1.23456789TB/s,arch=ampere,cpu=amd",
		"dgx-b200x2,sharp=inf", "gb200-nvl72x1", "dgx-h100,nvls=off,cpu=unknown",
	}
	for _, p := range Presets() {
		specs = append(specs, strings.Replace(p.Name, "N", "2", 1))
	}
	for _, s := range specs {
		roundTrip(t, mustParse(t, s))
	}
	// Odd values and names that YAML would misread without quoting.
	nodes := []Node{
		{Name: "null", Kind: GPU, ReduceBW: 4.3e12 / 3, Arch: Volta},
		{Name: "123", Kind: GPU, ReduceBW: math.SmallestNonzeroFloat64, Arch: Blackwell},
		{Name: "true", Kind: GPU, ReduceBW: math.MaxFloat64},
		{Name: "a: b", Kind: Switch, ReduceBW: 1.0 / 3},
		{Name: " spaced ", Kind: NIC},
		{Name: "~", Kind: CPU},
		{Name: "- x", Kind: CPU},
		{Name: "#hash", Kind: CPU},
		{Name: "ünï💡", Kind: CPU},
		{Name: "'\"", Kind: CPU},
	}
	links := []Link{
		{0, 3, 1.0 / 3, 1e-300}, {1, 3, 1e300, 0.1}, {2, 3, 123456789.123456789, 936.25e-9},
		{4, 3, 5e-324, 1}, {5, 3, 7, 3e-7}, {6, 5, 1e18, 1e-12}, {7, 5, 1e17, 5e-324},
		{8, 5, 0.1, 0.999}, {9, 8, 1e-5, 123e-6},
	}
	long := strings.Repeat("word  and   spaces ", 50) + "end"
	nodes = append(nodes, Node{Name: long, Kind: CPU})
	links = append(links, Link{10, 0, 1e9, 0})
	tp, err := New("name: with # odd \"chars\" "+long, nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, tp)
	for _, c := range []CPUVendor{UnknownCPU, IntelCPU, AMDCPU, ARMCPU} {
		tp.HostCPU = c
		roundTrip(t, tp)
	}
	for _, n := range []int{2, MaxNICPorts} {
		tp.NICPorts = n
		roundTrip(t, tp)
	}
	tp.NICPorts = MaxNICPorts + 1
	if err := tp.WriteYAML(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "17 NIC ports") {
		t.Errorf("WriteYAML with 17 NIC ports: %v", err)
	}
	tp.NICPorts = 0
	tp.HostCPU = ARMCPU + 1
	if err := tp.WriteYAML(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "unknown host cpu vendor 4") {
		t.Errorf("WriteYAML with a bad vendor: %v", err)
	}
}

func TestYAMLFormat(t *testing.T) {
	var buf bytes.Buffer
	if err := mustParse(t, "switch:2,lat=468.125ns,bw=450GB/s").WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	want := `name: switch:2,lat=468.125ns,bw=450GB/s
nodes:
  - {name: gpu0, kind: gpu, reduce: inf}
  - {name: gpu1, kind: gpu, reduce: inf}
  - {name: sw0, kind: switch}
links:
  - {a: gpu0, b: sw0, bw: 450GB/s, lat: 468.125ns}
  - {a: gpu1, b: sw0, bw: 450GB/s, lat: 468.125ns}
`
	if buf.String() != want {
		t.Errorf("WriteYAML:\n%s\nwant:\n%s", buf.String(), want)
	}
	// The facts NCCL needs: cpu at the top, a gpu's arch, a switch's reduce;
	// each only when set.
	buf.Reset()
	if err := mustParse(t, "cluster:1x2,rail=true,arch=hopper,cpu=intel,nvls=276GB/s,sharp=inf").WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	want = `name: cluster:1x2,rail=true,arch=hopper,cpu=intel,nvls=276GB/s,sharp=inf
cpu: intel
nodes:
  - {name: gpu0, kind: gpu, arch: hopper, reduce: inf}
  - {name: gpu1, kind: gpu, arch: hopper, reduce: inf}
  - {name: sw0, kind: switch, reduce: 276GB/s}
  - {name: nic0, kind: nic}
  - {name: nic1, kind: nic}
  - {name: rail0, kind: switch, reduce: inf}
  - {name: rail1, kind: switch, reduce: inf}
  - {name: spine, kind: switch, reduce: inf}
links:
  - {a: gpu0, b: sw0, bw: 100GB/s, lat: 1us}
  - {a: gpu1, b: sw0, bw: 100GB/s, lat: 1us}
  - {a: gpu0, b: nic0, bw: 64GB/s, lat: 0}
  - {a: gpu1, b: nic1, bw: 64GB/s, lat: 0}
  - {a: nic0, b: rail0, bw: 50GB/s, lat: 2us}
  - {a: nic1, b: rail1, bw: 50GB/s, lat: 2us}
  - {a: rail0, b: spine, bw: 50GB/s, lat: 2us}
  - {a: rail1, b: spine, bw: 50GB/s, lat: 2us}
`
	if buf.String() != want {
		t.Errorf("WriteYAML:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	mustParse(t, "ring:1").WriteYAML(&buf)
	if !strings.Contains(buf.String(), "links: []") {
		t.Errorf("ring:1 export: %s", buf.String())
	}
	if err := (&Topology{}).WriteYAML(&buf); err == nil {
		t.Error("WriteYAML of a bare Topology: no error")
	}
}

func TestLoadGood(t *testing.T) {
	tp, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if tp.Name != "my-fabric" || len(tp.Nodes) != 4 || len(tp.Links) != 3 || tp.NumGPUs() != 2 {
		t.Fatalf("good.yaml: %+v", tp)
	}
	if tp.Nodes[0].ReduceBW != 1.43e12 || !math.IsInf(tp.Nodes[1].ReduceBW, 1) || tp.Nodes[3].Kind != CPU {
		t.Errorf("good.yaml nodes: %+v", tp.Nodes)
	}
	if l := tp.Links[0]; l.BW != 450e9 || l.Latency != 468.125e-9 {
		t.Errorf("good.yaml link 0: %+v", l)
	}
	p, err := tp.RouteRanks(0, 1)
	if err != nil || p.Latency != 936.25e-9 {
		t.Errorf("good.yaml route: %+v %v", p, err)
	}
	roundTrip(t, tp)

}

func TestLoadBad(t *testing.T) {
	tests := map[string]string{
		"duplicate-name.yaml":     "yaml: line 5: node 2 (gpu0): duplicate name, already used by node 0",
		"duplicate-alias.yaml":    "yaml: line 3: node 1 (gpu0): duplicate name, already used by node 0", // the alias's line, not its anchor's
		"unknown-ref.yaml":        `line 7: link 1 (gpu0-sw9): b names the unknown node "sw9"`,
		"bw-zero.yaml":            `line 6: link 0 (gpu0-sw0): bw: bandwidth "0GB/s": must be > 0`,
		"bw-negative.yaml":        `link 0 (gpu0-sw0): bw: bandwidth "-5GB/s": must be > 0`,
		"bw-inf.yaml":             "line 5: link 0 (gpu0-gpu1): bandwidth must be > 0 and finite, got +Inf",
		"disconnected.yaml":       "line 5: disconnected: node 2 (gpu2) is not reachable from gpu0 (node 0)",
		"unknown-field.yaml":      `line 3: node 0 (gpu0): unknown field "color" (want name, kind, arch, reduce)`,
		"unknown-link-field.yaml": `line 6: link 0 (gpu0-gpu1): unknown field "latency" (want a, b, bw, lat)`,
		"unknown-top-field.yaml":  `line 2: unknown top-level field "version"`,
		"missing-kind.yaml":       "line 3: node 1 (sw0): missing kind",
		"missing-bw.yaml":         "line 5: link 0 (gpu0-gpu1): missing bw",
		"missing-name.yaml":       "line 3: node 1: missing name",
		"reduce-on-nic.yaml":      "line 3: node 1 (nic0): reduce applies only to gpus and switches, not to a nic",
		"arch-on-switch.yaml":     "line 3: node 1 (sw0): arch applies only to gpus, not to a switch",
		"bad-arch.yaml":           `line 2: node 0 (gpu0): arch: unknown gpu arch "kepler" (want volta, ampere, hopper, blackwell or unknown)`,
		"bad-cpu.yaml":            `line 1: cpu: unknown cpu vendor "sparc" (want intel, amd, arm or unknown)`,
		"switch-reduce-zero.yaml": `line 3: node 1 (sw0): reduce: bandwidth "0GB/s": must be > 0`,
		"bad-kind.yaml":           `line 2: node 0 (tpu0): unknown node kind "tpu"`,
		"no-gpu.yaml":             "no gpu among 1 nodes",
		"bad-latency.yaml":        `line 5: link 0 (gpu0-gpu1): lat: latency "5": missing unit`,
		"field-twice.yaml":        `line 2: node 0 (gpu0): field "kind" given twice`,
		"no-nodes.yaml":           "missing nodes",
		"two-docs.yaml":           "line 3: a second document",
		"not-a-mapping.yaml":      "line 1: the document must be a mapping",
		"self-loop.yaml":          "line 4: link 0 (gpu0-gpu0): self-loop",
		"parallel.yaml":           "line 6: link 1 (gpu1-gpu0): parallel to link 0",
		"syntax.yaml":             "yaml: line",
	}
	entries, err := os.ReadDir("testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(tests) {
		t.Errorf("%d files in testdata/bad, %d cases", len(entries), len(tests))
	}
	for file, frag := range tests {
		path := filepath.Join("testdata", "bad", file)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: no error, want %q", file, frag)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, frag) || !strings.HasPrefix(msg, "topology: load "+path+": ") {
			t.Errorf("%s: error\n  %s\nwant fragment %q", file, msg, frag)
		}
		if !errors.Is(err, ErrYAML) && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error wraps neither ErrYAML nor ErrInvalid: %v", file, err)
		}
		if strings.Count(msg, "topology:") != 1 {
			t.Errorf("%s: repeated prefix: %s", file, msg)
		}
	}
}

func TestReadYAMLEdgeCases(t *testing.T) {
	tests := []struct{ in, frag string }{
		{"", "empty document"},
		{"# only a comment\n", "empty document"},
		{"nodes: gpu0\n", "nodes must be a list"},
		{"nodes:\n", "missing nodes"},
		{"nodes: [gpu0]\n", "node 0: want a mapping"},
		{"nodes: [{name: [a], kind: gpu}]\n", `field "name" must be a single value`},
		{"nodes: [{name: g, kind: gpu}]\nlinks: {a: b}\n", "links must be a list"},
		{"name: [x]\nnodes: [{name: g, kind: gpu}]\n", "name must be a single value"},
		{"name: a\nname: b\nnodes: [{name: g, kind: gpu}]\n", `top-level field "name" given twice`},
		{"nodes: [{name: g, kind: gpu, reduce: 0B/s}]\n", "node 0 (g): reduce"},
		{"nodes: [{name: g, kind: gpu, reduce: fast}]\n", `bandwidth "fast"`},
		{"nodes: [{name: g, kind: gpu}, {name: h, kind: gpu}]\nlinks: [{a: g, b: h, bw: inf, lat: 0}]\n", "link 0 (g-h): bandwidth must be > 0 and finite, got +Inf"},
		{"nodes: [{name: g, kind: gpu}, {name: h, kind: gpu}]\nlinks: [{a: g, b: h, bw: 1GB/s, lat: 2s}]\n", "latency must be between 0 and 1s, got 2"},
		{"nodes: [{name: g, kind: gpu}, {name: h, kind: gpu}]\nlinks: [{a: g, bw: 1GB/s, lat: 0}]\n", "link 0 (g-?): missing b"},
		{"nodes: [{name: g, kind: gpu}, {name: h, kind: gpu}]\nlinks: [{a: g, b: , bw: 1GB/s, lat: 0}]\n", "link 0 (g-?): missing b"},
		{"nodes: [{name: \"\", kind: gpu}]\n", "node 0: missing name"},
		{"nodes: [{name: \"g\\n\", kind: gpu}]\n", "unprintable"},
		{"nodes: [{<<: {name: g}, kind: gpu}]\n", `unknown field "<<"`},
		{"{[a]: b}\n", "field names must be plain strings"},
		{"a: &x [*x]\n", "unknown top-level field"},
		{"cpu: [intel]\nnodes: [{name: g, kind: gpu}]\n", "line 1: cpu must be a single value"},
		{"cpu: intel\ncpu: amd\nnodes: [{name: g, kind: gpu}]\n", `line 2: top-level field "cpu" given twice`},
		{"nic_ports: 0\nnodes: [{name: g, kind: gpu}]\n", `line 1: nic_ports "0": want a whole number from 1 to 16`},
		{"nic_ports: two\nnodes: [{name: g, kind: gpu}]\n", `line 1: nic_ports "two"`},
		{"nic_ports: [2]\nnodes: [{name: g, kind: gpu}]\n", "line 1: nic_ports must be a single value"},
		{"nodes: [{name: g, kind: gpu, arch: [hopper]}]\n", `node 0 (g): field "arch" must be a single value`},
		{"nodes: [{name: g, kind: gpu, arch: sm90}]\n", `line 1: node 0 (g): arch: unknown gpu arch "sm90"`},
		{"nodes: [{name: g, kind: gpu}, {name: n, kind: nic, arch: hopper}]\n", "node 1 (n): arch applies only to gpus, not to a nic"},
		{"nodes: [{name: g, kind: gpu}, {name: c, kind: cpu, reduce: inf}]\n", "node 1 (c): reduce applies only to gpus and switches, not to a cpu"},
		{"nodes: [{name: g, kind: gpu}, {name: s, kind: switch, reduce: -1GB/s}]\n", `node 1 (s): reduce: bandwidth "-1GB/s": must be > 0`},
	}
	for _, tc := range tests {
		_, err := ReadYAML([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("ReadYAML(%q): %v, want %q", tc.in, err, tc.frag)
		}
	}
	// Aliases to values are followed.
	tp, err := ReadYAML([]byte("nodes: [{name: &n g, kind: gpu}, {name: h, kind: gpu}]\nlinks: [{a: *n, b: h, bw: &b 1GB/s, lat: 0}]\n"))
	if err != nil || tp.Links[0].BW != 1e9 {
		t.Errorf("aliases: %v", err)
	}
	// cpu and arch given as null, or as unknown, are unknown; case does not
	// matter; a switch without reduce cannot reduce.
	tp, err = ReadYAML([]byte("cpu:\nnodes: [{name: g, kind: gpu, arch: }, {name: h, kind: gpu, arch: Unknown}, {name: s, kind: switch}]\nlinks: [{a: g, b: s, bw: 1GB/s, lat: 0}, {a: h, b: s, bw: 1GB/s, lat: 0}]\n"))
	if err != nil || tp.HostCPU != UnknownCPU || tp.Nodes[0].Arch != UnknownArch || tp.Nodes[1].Arch != UnknownArch || tp.Nodes[2].ReduceBW != 0 {
		t.Errorf("null and unknown facts: %v", err)
	}
	tp, err = ReadYAML([]byte("cpu: AMD\nnodes: [{name: g, kind: gpu, arch: Blackwell}, {name: s, kind: switch, reduce: 900GB/s}]\nlinks: [{a: g, b: s, bw: 1GB/s, lat: 0}]\n"))
	if err != nil || tp.HostCPU != AMDCPU || tp.Nodes[0].Arch != Blackwell || tp.Nodes[1].ReduceBW != 900e9 {
		t.Errorf("facts: %v", err)
	}
	// links may be omitted for one GPU.
	if tp, err := ReadYAML([]byte("nodes: [{name: g, kind: gpu}]\n")); err != nil || tp.Name != "" || len(tp.Links) != 0 {
		t.Errorf("one gpu, no links: %v", err)
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ring:3") // a file whose name looks like a spec wins
	var buf bytes.Buffer
	mustParse(t, "ring:5").WriteYAML(&buf)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tp, err := Resolve(path)
	if err != nil || tp.NumGPUs() != 5 {
		t.Fatalf("Resolve(file): %v", err)
	}
	tp, err = Resolve("ring:3")
	if err != nil || tp.NumGPUs() != 3 {
		t.Fatalf("Resolve(spec): %v", err)
	}
	_, err = Resolve(filepath.Join(dir, "missing.YAML"))
	if err == nil || !strings.Contains(err.Error(), "missing.YAML") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Resolve(missing yaml): %v", err)
	}
	_, err = Resolve(dir) // a directory is not a topology file
	if err == nil || !strings.Contains(err.Error(), "is a directory") || errors.Is(err, ErrSpec) {
		t.Fatalf("Resolve(dir): %v", err)
	}
	t.Chdir(dir)
	if _, err = Resolve("."); err == nil || !strings.Contains(err.Error(), "a directory, not a topology file") {
		t.Fatalf("Resolve(.): %v", err)
	}
	// A path, as no spec starts, is a file, there or not.
	for _, missing := range []string{"./sw2", "../sw2", filepath.Join(dir, "sw2")} {
		if _, err = Resolve(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
			t.Errorf("Resolve(%s): %v, want no such file", missing, err)
		}
	}
}

// A pipe is read as the file it names (/dev/stdin, a shell's <(…)), not
// parsed as a spec.
func TestResolveReadsAPipe(t *testing.T) {
	if _, err := os.Stat("/dev/fd/0"); err != nil {
		t.Skip("no /dev/fd here:", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ring := mustParse(t, "ring:4")
	go func() {
		ring.WriteYAML(w)
		w.Close()
	}()
	tp, err := Resolve(fmt.Sprintf("/dev/fd/%d", r.Fd()))
	if err != nil || tp.NumGPUs() != 4 {
		t.Fatalf("Resolve(pipe): %v", err)
	}
}

// TestFormatDocExample loads the example of FORMAT.md, so the documented
// format stays the real one.
func TestFormatDocExample(t *testing.T) {
	md, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(md), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("FORMAT.md has no yaml block")
	}
	tp, err := ReadYAML([]byte(block))
	if err != nil {
		t.Fatalf("FORMAT.md example: %v", err)
	}
	if tp.Name != "my-fabric" || tp.NumGPUs() != 2 || len(tp.Links) != 4 || tp.Links[3].BW != 50e9 || !math.IsInf(tp.Nodes[1].ReduceBW, 1) ||
		tp.HostCPU != IntelCPU || tp.Nodes[0].Arch != Hopper || tp.Nodes[1].Arch != UnknownArch || tp.Nodes[2].ReduceBW != 276e9 {
		t.Errorf("FORMAT.md example read as %+v", tp)
	}
	roundTrip(t, tp)
}

// A name thousands of characters long is clipped in the one-line error, so
// that the reason after it can be read; its first characters still say
// which node it is.
func TestErrorsClipLongNames(t *testing.T) {
	long := strings.Repeat("b", 3000)
	tests := []struct{ in, frag string }{
		{"nodes: [{name: " + long + ", kind: gpu}]\n", `node 0 ("` + long[:64] + `…"): name is 3000 bytes, more than the limit of 1024`},
		{"nodes: [{name: g, kind: gpu}, {name: " + long[:1000] + ", kind: gpux}]\n", "node 1 (" + long[:64] + "…): unknown node kind"},
		{"nodes: [{name: g, kind: gpu}]\nlinks: [{a: g, b: " + long + ", bw: 1GB/s, lat: 0}]\n", `link 0 (g-` + long[:64] + `…): b names the unknown node "` + long[:64] + `…"`},
		{"nodes: [{name: " + strings.Repeat("é", 600) + ", kind: gpu}]\n", `node 0 ("` + strings.Repeat("é", 32) + `…")`},
	}
	for _, tc := range tests {
		_, err := ReadYAML([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.frag) || len(err.Error()) > 300 {
			t.Errorf("ReadYAML(%.40q…): %v, want %q in under 300 bytes", tc.in, err, tc.frag)
		}
	}
	if _, err := New(long, []Node{{Name: "g", Kind: GPU, ReduceBW: 1}}, nil); err == nil || len(err.Error()) > 300 {
		t.Errorf("New with a long topology name: %v, want an error under 300 bytes", err)
	}
}

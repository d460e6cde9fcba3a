package topology

import (
	"math"
	"strconv"
	"strings"

	"github.com/commsim/commsim/internal/suggest"
)

// maxSpecLen bounds the length of a spec string.
const maxSpecLen = 4096

// Defaults of the generic generators (ring, mesh, switch, torus, cluster).
const (
	DefaultBW      = 100e9 // bw=100GB/s per direction
	DefaultLatency = 1e-6  // lat=1us
	DefaultNICBW   = 50e9  // nicbw=50GB/s: one NDR InfiniBand port, 400Gb/s
	DefaultNICLat  = 2e-6  // niclat=2us
	DefaultPCIeBW  = 64e9  // pciebw=64GB/s: PCIe Gen5 x16 per direction
	DefaultPCIeLat = 0.0   // pcielat=0
)

// Override keys.
const (
	keyBW      = "bw"
	keyLat     = "lat"
	keyReduce  = "reduce"
	keyArch    = "arch"
	keyCPU     = "cpu"
	keyNVLS    = "nvls"
	keyNICBW   = "nicbw"
	keyNICLat  = "niclat"
	keyPCIeBW  = "pciebw"
	keyPCIeLat = "pcielat"
	keyRail    = "rail"
	keySHARP   = "sharp"
	keyPorts   = "nicports"
	keyGPUs    = "gpus"
)

// MaxNICPorts is the most ports a NIC link may stand for (nicports=).
const MaxNICPorts = 16

// parseNICPorts reads a count of NIC ports (nicports=, YAML's nic_ports):
// a whole number from 1 to MaxNICPorts.
func parseNICPorts(s string) (int, bool) {
	v, err := strconv.Atoi(s)
	return v, err == nil && v >= 1 && v <= MaxNICPorts
}

var allKeys = []string{keyBW, keyLat, keyReduce, keyArch, keyCPU, keyNVLS, keyNICBW, keyNICLat, keyPCIeBW, keyPCIeLat, keyRail, keySHARP, keyPorts, keyGPUs}

// params are the numbers a generator builds with: defaults, then overrides.
type params struct {
	bw, lat, reduce float64
	arch            Arch      // of every GPU
	cpu             CPUVendor // the topology's HostCPU
	nvls            float64   // ReduceBW of the GPUs' own switches (sw<m>), 0: none
	nicbw, niclat   float64
	pciebw, pcielat float64
	rail            bool
	sharp           float64 // ReduceBW of the network switches (netsw, rails, spine), 0: none
	nicports        int     // the topology's NICPorts
	gpus            int     // a preset's GPUs in use on each node (gpus=), 0: all
}

func genericParams() params {
	return params{
		bw: DefaultBW, lat: DefaultLatency, reduce: math.Inf(1), // reduce=inf: free
		nicbw: DefaultNICBW, niclat: DefaultNICLat,
		pciebw: DefaultPCIeBW, pcielat: DefaultPCIeLat,
	}
}

var (
	plainKeys   = []string{keyBW, keyLat, keyReduce, keyArch, keyCPU}
	switchKeys  = []string{keyBW, keyLat, keyReduce, keyArch, keyCPU, keyNVLS}
	clusterKeys = []string{keyBW, keyLat, keyReduce, keyArch, keyCPU, keyNVLS, keyNICBW, keyNICLat, keyPCIeBW, keyPCIeLat, keyRail, keySHARP, keyPorts}
)

// Parse builds a topology from a spec string KIND:SHAPE[,key=value…] or a
// preset name[,key=value…]; see the package documentation for the kinds,
// keys, defaults and presets. The topology's Name is the spec, trimmed.
func Parse(spec string) (*Topology, error) {
	if len(spec) > maxSpecLen {
		return nil, newErr(ErrSpec, "spec is %d bytes long, more than the limit of %d", len(spec), maxSpecLen)
	}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, newErr(ErrSpec, "empty spec: want KIND:SHAPE[,key=value…] (ring:8, switch:16, cluster:4x8, …) or a preset (dgx-h100, …)")
	}
	parts := strings.Split(spec, ",")
	head := strings.TrimSpace(parts[0])
	kind, shape, hasShape := strings.Cut(head, ":")
	kind = strings.ToLower(strings.TrimSpace(kind))
	shape = strings.TrimSpace(shape)

	fam, count, err := lookupFamily(spec, kind, shape, hasShape)
	if err != nil {
		return nil, err
	}
	p := fam.defaults
	if err := applyOverrides(spec, fam, parts[1:], &p); err != nil {
		return nil, err
	}
	nodes, links, err := fam.build(spec, count, p)
	if err != nil {
		return nil, err
	}
	t, err := New(spec, nodes, links)
	if err != nil {
		return nil, wrapErr(ErrSpec, err, "spec %q", spec)
	}
	t.HostCPU, t.NICPorts = p.cpu, p.nicports
	return t, nil
}

// family is one spec kind or preset.
type family struct {
	name     string   // as shown in messages: "ring", "dgx-h100xN"
	keys     []string // override keys it takes
	defaults params
	// build makes the nodes and links; count is the parsed shape.
	build func(spec string, count []int, p params) ([]Node, []Link, error)
}

func lookupFamily(spec, kind, shape string, hasShape bool) (family, []int, error) {
	generic := map[string]family{
		"ring":    {"ring", plainKeys, genericParams(), buildRing},
		"mesh":    {"mesh", plainKeys, genericParams(), buildMesh},
		"switch":  {"switch", switchKeys, genericParams(), buildSwitch},
		"torus":   {"torus", plainKeys, genericParams(), buildTorus},
		"cluster": {"cluster", clusterKeys, genericParams(), buildCluster},
	}
	if f, ok := generic[kind]; ok {
		if !hasShape || shape == "" {
			return family{}, nil, newErr(ErrSpec, "spec %q: %s needs a shape, e.g. %s", spec, kind, shapeExample(kind))
		}
		var dims []int
		var err error
		switch kind {
		case "torus":
			dims, err = parseDims(spec, kind, shape, 2, 3)
		case "cluster":
			dims, err = parseDims(spec, kind, shape, 2, 2)
		default:
			var n int
			n, err = parseCount(spec, kind+" size", shape)
			dims = []int{n}
		}
		return f, dims, err
	}
	if f, n, ok, err := lookupPreset(spec, kind, shape, hasShape); ok || err != nil {
		return f, n, err
	}
	return family{}, nil, newErr(ErrSpec, "spec %q: unknown kind %q (want ring, mesh, switch, torus, cluster or a preset: %s)%s", spec, kind, presetNames(),
		suggest.DidYouMean(kind, specKinds()))
}

func shapeExample(kind string) string {
	switch kind {
	case "torus":
		return "torus:4x4 or torus:4x4x4"
	case "cluster":
		return "cluster:4x8 (4 nodes of 8 gpus)"
	}
	return kind + ":8"
}

// parseCount parses a positive decimal size of at most MaxNodes.
func parseCount(spec, what, s string) (int, error) {
	if s == "" {
		return 0, newErr(ErrSpec, "spec %q: %s is empty", spec, what)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, newErr(ErrSpec, "spec %q: %s %q is not a whole number of 1 or more", spec, what, s)
		}
		if n <= MaxNodes {
			n = n*10 + int(c-'0')
		}
	}
	if n < 1 {
		return 0, newErr(ErrSpec, "spec %q: %s must be >= 1, got %s", spec, what, s)
	}
	if n > MaxNodes {
		return 0, newErr(ErrSpec, "spec %q: %s %s is more than the limit of %d nodes", spec, what, s, MaxNodes)
	}
	return n, nil
}

// parseDims parses AxB[xC…] with between lo and hi dimensions.
func parseDims(spec, kind, shape string, lo, hi int) ([]int, error) {
	fields := strings.Split(strings.ToLower(shape), "x")
	if len(fields) < lo || len(fields) > hi {
		return nil, newErr(ErrSpec, "spec %q: %s shape %q: want %s", spec, kind, shape, shapeExample(kind))
	}
	dims := make([]int, len(fields))
	for i, f := range fields {
		n, err := parseCount(spec, kind+" dimension", strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		dims[i] = n
	}
	return dims, nil
}

func applyOverrides(spec string, fam family, kvs []string, p *params) error {
	seen := map[string]bool{}
	for _, kv := range kvs {
		kv = strings.TrimSpace(kv)
		key, val, ok := strings.Cut(kv, "=")
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		if !ok || key == "" {
			return newErr(ErrSpec, "spec %q: override %q: want key=value (%s takes %s)", spec, kv, fam.name, strings.Join(fam.keys, ", "))
		}
		known, applies := false, false
		for _, k := range allKeys {
			known = known || k == key
		}
		for _, k := range fam.keys {
			applies = applies || k == key
		}
		if !known {
			return newErr(ErrSpec, "spec %q: unknown key %q (%s takes %s)", spec, key, fam.name, strings.Join(fam.keys, ", "))
		}
		if !applies {
			return newErr(ErrSpec, "spec %q: key %q does not apply to %s (%s takes %s)", spec, key, fam.name, fam.name, strings.Join(fam.keys, ", "))
		}
		if seen[key] {
			return newErr(ErrSpec, "spec %q: key %q given twice", spec, key)
		}
		seen[key] = true
		if err := setParam(p, key, val); err != nil {
			return wrapErr(ErrSpec, err, "spec %q: key %s=%q", spec, key, val)
		}
	}
	return nil
}

func setParam(p *params, key, val string) error {
	switch key {
	case keyBW, keyNICBW, keyPCIeBW, keyReduce:
		v, err := ParseBandwidth(val)
		if err != nil {
			return err
		}
		if math.IsInf(v, 1) && key != keyReduce {
			return newErr(ErrSpec, "%s must be finite; only reduce= may be inf", key)
		}
		switch key {
		case keyBW:
			p.bw = v
		case keyNICBW:
			p.nicbw = v
		case keyPCIeBW:
			p.pciebw = v
		default:
			p.reduce = v
		}
	case keyLat, keyNICLat, keyPCIeLat:
		v, err := ParseLatency(val)
		if err != nil {
			return err
		}
		if v > MaxLatency {
			return newErr(ErrSpec, "%s %s is more than the limit of %gs", key, val, MaxLatency)
		}
		switch key {
		case keyLat:
			p.lat = v
		case keyNICLat:
			p.niclat = v
		default:
			p.pcielat = v
		}
	case keyPorts:
		v, ok := parseNICPorts(val)
		if !ok {
			return newErr(ErrSpec, "nicports must be a whole number from 1 to %d", MaxNICPorts)
		}
		p.nicports = v
	case keyRail:
		v, err := strconv.ParseBool(val)
		if err != nil {
			return newErr(ErrSpec, "rail must be true or false")
		}
		p.rail = v
	case keyArch:
		a, err := ParseArch(val)
		if err != nil {
			return err
		}
		p.arch = a
	case keyCPU:
		c, err := ParseCPUVendor(val)
		if err != nil {
			return err
		}
		p.cpu = c
	case keyGPUs:
		v, err := strconv.Atoi(val)
		if err != nil || v < 1 {
			return newErr(ErrSpec, "gpus must be a whole number of GPUs a node, at least 1")
		}
		p.gpus = v
	case keyNVLS, keySHARP:
		v := 0.0 // off: the switches do not reduce
		if !strings.EqualFold(val, "off") {
			var err error
			if v, err = ParseBandwidth(val); err != nil {
				return wrapErr(ErrSpec, err, "%s takes a bandwidth, inf or off", key)
			}
		}
		if key == keyNVLS {
			p.nvls = v
		} else {
			p.sharp = v
		}
	}
	return nil
}

// builder accumulates nodes and links with preallocated slices.
type builder struct {
	nodes []Node
	links []Link
}

func newBuilder(nodes, links int) *builder {
	return &builder{nodes: make([]Node, 0, nodes), links: make([]Link, 0, links)}
}

func (b *builder) add(name string, k Kind, reduce float64) int {
	b.nodes = append(b.nodes, Node{Name: name, Kind: k, ReduceBW: reduce})
	return len(b.nodes) - 1
}

// addGPUs adds gpu0..gpu(n-1) with p's reduce bandwidth and arch.
func (b *builder) addGPUs(n int, p params) {
	for i := 0; i < n; i++ {
		b.nodes = append(b.nodes, Node{Name: "gpu" + strconv.Itoa(i), Kind: GPU, ReduceBW: p.reduce, Arch: p.arch})
	}
}

func (b *builder) link(a, c int, bw, lat float64) {
	b.links = append(b.links, Link{A: a, B: c, BW: bw, Latency: lat})
}

// buildRing: GPU i links GPU i+1 mod n; n=1 has no link, n=2 one link.
func buildRing(_ string, count []int, p params) ([]Node, []Link, error) {
	n := count[0]
	nl := n
	if n <= 2 {
		nl = n - 1
	}
	b := newBuilder(n, nl)
	b.addGPUs(n, p)
	for i := 0; i < nl; i++ {
		b.link(i, (i+1)%n, p.bw, p.lat)
	}
	return b.nodes, b.links, nil
}

// buildMesh: a link between every pair (i<j), in order of i then j.
func buildMesh(spec string, count []int, p params) ([]Node, []Link, error) {
	n := count[0]
	nl := n * (n - 1) / 2 // n <= MaxNodes, so no overflow
	if nl > MaxLinks {
		return nil, nil, newErr(ErrSpec, "spec %q: mesh:%d needs %d links, more than the limit of %d", spec, n, nl, MaxLinks)
	}
	b := newBuilder(n, nl)
	b.addGPUs(n, p)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			b.link(i, j, p.bw, p.lat)
		}
	}
	return b.nodes, b.links, nil
}

// buildSwitch: GPUs gpu0..gpuN-1, then sw0 (reducing at nvls); link i
// joins gpu i to sw0.
func buildSwitch(spec string, count []int, p params) ([]Node, []Link, error) {
	n := count[0]
	if n+1 > MaxNodes {
		return nil, nil, newErr(ErrSpec, "spec %q: switch:%d needs %d nodes, more than the limit of %d", spec, n, n+1, MaxNodes)
	}
	b := newBuilder(n+1, n)
	b.addGPUs(n, p)
	sw := b.add("sw0", Switch, p.nvls)
	for i := 0; i < n; i++ {
		b.link(i, sw, p.bw, p.lat)
	}
	return b.nodes, b.links, nil
}

// buildTorus: GPUs in row-major order (last dimension fastest); each GPU
// links to its +1 neighbour in every dimension of size > 2, mod the size; a
// dimension of size 2 has one link per pair (from coordinate 0), size 1 none.
func buildTorus(spec string, dims []int, p params) ([]Node, []Link, error) {
	n := 1
	for _, d := range dims {
		if n > MaxNodes/d {
			return nil, nil, newErr(ErrSpec, "spec %q: torus has more than the limit of %d nodes", spec, MaxNodes)
		}
		n *= d
	}
	b := newBuilder(n, n*len(dims))
	b.addGPUs(n, p)
	coord := make([]int, len(dims))
	for i := 0; i < n; i++ {
		stride := 1
		for k := len(dims) - 1; k >= 0; k-- {
			d := dims[k]
			if d > 2 || (d == 2 && coord[k] == 0) {
				next := (coord[k] + 1) % d
				b.link(i, i+(next-coord[k])*stride, p.bw, p.lat)
			}
			stride *= d
		}
		for k := len(dims) - 1; k >= 0; k-- { // advance the row-major coordinate
			coord[k]++
			if coord[k] < dims[k] {
				break
			}
			coord[k] = 0
		}
	}
	return b.nodes, b.links, nil
}

// buildCluster: M nodes of G GPUs. Node order: gpu0..gpu(MG-1) (node m's
// local GPU g is gpu(m*G+g)), node switches sw0..sw(M-1) (reducing at
// nvls), NICs nic0..nic(MG-1) (nic i belongs to gpu i), then netsw, or
// rail0..rail(G-1) and spine with rail=true (all reducing at sharp). Link
// order: gpu-sw (bw, lat), gpu-nic (pciebw, pcielat), nic-netsw or
// nic-rail (nicbw, niclat), rail-spine (M*nicbw, niclat).
func buildCluster(spec string, dims []int, p params) ([]Node, []Link, error) {
	m, g := dims[0], dims[1]
	if m > MaxNodes/g {
		return nil, nil, newErr(ErrSpec, "spec %q: cluster of %d×%d gpus is more than the limit of %d nodes", spec, m, g, MaxNodes)
	}
	ngpu := m * g
	nnodes := 2*ngpu + m + 1
	if p.rail {
		nnodes = 2*ngpu + m + g + 1
	}
	if nnodes > MaxNodes {
		return nil, nil, newErr(ErrSpec, "spec %q: cluster:%dx%d needs %d nodes, more than the limit of %d", spec, m, g, nnodes, MaxNodes)
	}
	nlinks := 3 * ngpu
	if p.rail {
		nlinks += g
	}
	b := newBuilder(nnodes, nlinks)
	b.addGPUs(ngpu, p)
	sw0 := len(b.nodes)
	for i := 0; i < m; i++ {
		b.add("sw"+strconv.Itoa(i), Switch, p.nvls)
	}
	nic0 := len(b.nodes)
	for i := 0; i < ngpu; i++ {
		b.add("nic"+strconv.Itoa(i), NIC, 0)
	}
	for i := 0; i < ngpu; i++ {
		b.link(i, sw0+i/g, p.bw, p.lat)
	}
	for i := 0; i < ngpu; i++ {
		b.link(i, nic0+i, p.pciebw, p.pcielat)
	}
	if !p.rail {
		net := b.add("netsw", Switch, p.sharp)
		for i := 0; i < ngpu; i++ {
			b.link(nic0+i, net, p.nicbw, p.niclat)
		}
		return b.nodes, b.links, nil
	}
	rail0 := len(b.nodes)
	for r := 0; r < g; r++ {
		b.add("rail"+strconv.Itoa(r), Switch, p.sharp)
	}
	spine := b.add("spine", Switch, p.sharp)
	for i := 0; i < ngpu; i++ {
		b.link(nic0+i, rail0+i%g, p.nicbw, p.niclat)
	}
	for r := 0; r < g; r++ {
		b.link(rail0+r, spine, float64(m)*p.nicbw, p.niclat)
	}
	return b.nodes, b.links, nil
}

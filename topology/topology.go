package topology

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/traverse"
)

// Limits on what New, Parse and ReadYAML accept. Larger inputs are refused up
// front with the figure and the limit, before anything large is allocated.
const (
	// MaxNodes is the largest number of nodes in a topology.
	MaxNodes = 1 << 20
	// MaxLinks is the largest number of links in a topology.
	MaxLinks = 1 << 22
	// MaxLatency is the largest latency of one link, in seconds. Routing
	// weights are exact below about 8 s of path latency (see the package
	// doc's Routing).
	MaxLatency = 1.0
	// MaxNameBytes is the longest node or topology name, in bytes.
	MaxNameBytes = 1024
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can tell bad input from an invalid fabric with errors.Is.
var (
	// ErrSpec: a spec string, a key=value override, a bandwidth or a
	// latency string is malformed or out of range.
	ErrSpec = errors.New("topology: bad spec")
	// ErrInvalid: the nodes and links do not form a valid topology.
	ErrInvalid = errors.New("topology: invalid topology")
	// ErrYAML: a YAML document is malformed or has the wrong structure.
	ErrYAML = errors.New("topology: bad yaml")
	// ErrRoute: a route was asked for nodes or ranks that do not exist,
	// or of a Topology not built by New.
	ErrRoute = errors.New("topology: bad route")
)

// topoError is the error type of this package: a complete message, the
// sentinel it belongs to, and an optional cause.
type topoError struct {
	msg   string
	kind  error
	cause error
	// at is the node or link New refuses, nil for none: a file's reader
	// names the line it came from.
	at *element
}

// element is a node or a link of what New was given, by index.
type element struct {
	link  bool
	index int
}

// at marks err, made by newErr or wrapErr, as New's refusal of the node,
// or the link, at index i.
func at(err error, link bool, i int) error {
	err.(*topoError).at = &element{link, i}
	return err
}

// Error returns the message, then ": " and the cause's message without a
// second "topology: " prefix.
func (e *topoError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + strings.TrimPrefix(e.cause.Error(), "topology: ")
	}
	return e.msg
}

// Unwrap returns the sentinel and the cause, whichever are set.
func (e *topoError) Unwrap() []error {
	var out []error
	if e.kind != nil {
		out = append(out, e.kind)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

func newErr(kind error, format string, args ...any) error {
	return &topoError{msg: "topology: " + fmt.Sprintf(format, args...), kind: kind}
}

func wrapErr(kind, cause error, format string, args ...any) error {
	return &topoError{msg: "topology: " + fmt.Sprintf(format, args...), kind: kind, cause: cause}
}

// Kind is the kind of a node.
type Kind uint8

// Node kinds.
const (
	GPU Kind = iota + 1
	Switch
	NIC
	CPU
)

var kindNames = [...]string{GPU: "gpu", Switch: "switch", NIC: "nic", CPU: "cpu"}

// String returns "gpu", "switch", "nic" or "cpu", and "kind(N)" for anything
// else.
func (k Kind) String() string {
	if k >= GPU && k <= CPU {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind parses "gpu", "switch", "nic" or "cpu" (case-insensitive).
func ParseKind(s string) (Kind, error) {
	for k := GPU; k <= CPU; k++ {
		if strings.EqualFold(s, kindNames[k]) {
			return k, nil
		}
	}
	return 0, newErr(ErrSpec, "unknown node kind %q (want gpu, switch, nic or cpu)", s)
}

// Node is a vertex of the fabric.
type Node struct {
	Name string
	Kind Kind
	// ReduceBW is the bytes per second of reduction the node can do.
	//
	// On a GPU it is elementwise reduction: a reduce of s bytes takes
	// s/ReduceBW; math.Inf(1) means reduction is free. It must be > 0:
	// a GPU made in Go sets it (YAML leaves it +Inf where a GPU omits it).
	//
	// On a switch it is in-network reduction (NVLS on an NVSwitch, SHARP
	// on an InfiniBand switch): the switch combines the contributions of
	// several GPUs, s bytes each, into s bytes of result and multicasts
	// the result back. ReduceBW is the rate at which it produces results:
	// reducing s bytes takes s/ReduceBW of it, whatever the number of
	// contributions, shared by all reductions through the switch; the
	// links still carry every contribution in and the result out. 0 means
	// the switch cannot reduce; +Inf that it reduces as fast as its links
	// deliver.
	//
	// It is 0 on NICs and CPUs.
	ReduceBW float64
	// Arch is, for GPUs only, the GPU's architecture; UnknownArch when
	// the fabric does not say. It is UnknownArch for every other kind.
	Arch Arch
}

// Link is a full-duplex link between two nodes: each direction has its own
// bandwidth BW.
type Link struct {
	A, B    int     // node indices into Topology.Nodes
	BW      float64 // bytes per second, per direction, > 0 and finite
	Latency float64 // seconds, >= 0 and <= MaxLatency
}

// Topology is a validated fabric. Build it with New, Parse, Load, Resolve or
// ReadYAML. Nodes and Links must not be modified after New: the indexes
// (GPU list, adjacency, route cache) are built from them once.
//
// All methods are safe for concurrent use.
type Topology struct {
	Name  string
	Nodes []Node
	Links []Link
	// HostCPU is the vendor of the hosts' CPUs, UnknownCPU when the fabric
	// does not say. Unlike Nodes and Links it is not indexed: it may be
	// set after New.
	HostCPU CPUVendor
	// NICPorts is how many network ports each NIC link stands for, as a
	// communication library's topology search counts NICs: a GPU with two
	// 100 Gb/s ports is one NIC link of 200 Gb/s with NICPorts 2 (NCCL
	// then sees two NICs of 100 Gb/s). 0 or 1: one. Like HostCPU it is not
	// indexed and may be set after New.
	NICPorts int

	gpus []int // node indices of the GPUs, in Nodes order
	// Adjacency (CSR): node v's entries are adj[adjStart[v]:adjStart[v+1]];
	// first its neighbours with more than one link, then from adjLeaf[v]
	// its neighbours with a single link (leaves), each part sorted by node
	// index.
	adjStart []int32
	adjLeaf  []int32
	adj      []adjItem

	// routing holds what Route and ShortestRoutes found, shared with the
	// fabrics that differ from this one only in capacities (see
	// WithCapacities), which route as it does.
	routing *routeCache

	mu          sync.Mutex
	costs       map[int]*sourceCosts // PathCost's tables, by source rank
	cachedCosts int                  // entries in costs' tables
	shiftOnce   sync.Once
	shift       int // see rankShift
	// shiftPow[j] renames every directed edge as 2^j rotations by shift
	// ranks do (Automorphism), for RouteEdges.
	shiftPow [][]int

	// Every node's place by its nearest GPUs, the node at each place and
	// the links by their ends, for Automorphism; made once.
	placeOnce sync.Once
	place     []placement
	placed    map[string]int
	linkAt    map[[2]int]int // link index by its ends, A then B
}

// adjItem is one directed edge leaving a node.
type adjItem struct {
	nbr  int32 // neighbour node index
	edge int32 // directed edge id (2*link, or 2*link+1 for B->A)
}

// New validates nodes and links and indexes them. It keeps the slices it is
// given (it does not copy them): they must not be modified afterwards.
//
// A valid topology has at least one GPU; non-empty, unique, printable node
// names; known node kinds; ReduceBW > 0 (or +Inf) on GPUs, >= 0 (or +Inf)
// on switches and 0 on NICs and CPUs; a known Arch on GPUs and UnknownArch
// elsewhere; links whose endpoints exist and differ, with 0 < BW < +Inf and
// 0 <= Latency <= MaxLatency; at most one link between any two nodes (merge
// parallel links into one with the summed bandwidth); and a connected graph.
func New(name string, nodes []Node, links []Link) (*Topology, error) {
	if err := checkName(name); err != nil {
		return nil, wrapErr(ErrInvalid, err, "topology name %q", clipName(name))
	}
	if len(nodes) > MaxNodes {
		return nil, newErr(ErrInvalid, "%d nodes is more than the limit of %d", len(nodes), MaxNodes)
	}
	if len(links) > MaxLinks {
		return nil, newErr(ErrInvalid, "%d links is more than the limit of %d", len(links), MaxLinks)
	}
	t := &Topology{Name: name, Nodes: nodes, Links: links, routing: new(routeCache)}
	ngpu := 0
	for i, n := range nodes {
		if err := checkName(n.Name); err != nil {
			return nil, at(wrapErr(ErrInvalid, err, "node %d (%q)", i, clipName(n.Name)), false, i)
		}
		switch n.Kind {
		case GPU:
			ngpu++
			if !(n.ReduceBW > 0) {
				return nil, at(newErr(ErrInvalid, "node %d (%s): gpu reduce bandwidth must be > 0 (or inf), got %v", i, n.Name, n.ReduceBW), false, i)
			}
			if n.Arch > Blackwell {
				return nil, at(newErr(ErrInvalid, "node %d (%s): unknown gpu arch %d", i, n.Name, uint8(n.Arch)), false, i)
			}
		case Switch:
			if !(n.ReduceBW >= 0) {
				return nil, at(newErr(ErrInvalid, "node %d (%s): switch reduce bandwidth must be > 0 (or inf), or 0 for none, got %v", i, n.Name, n.ReduceBW), false, i)
			}
		case NIC, CPU:
			if n.ReduceBW != 0 {
				return nil, at(newErr(ErrInvalid, "node %d (%s): reduce bandwidth applies only to gpus and switches, got %v on a %s", i, n.Name, n.ReduceBW, n.Kind), false, i)
			}
		default:
			return nil, at(newErr(ErrInvalid, "node %d (%s): unknown kind %d", i, n.Name, uint8(n.Kind)), false, i)
		}
		if n.Kind != GPU && n.Arch != UnknownArch {
			return nil, at(newErr(ErrInvalid, "node %d (%s): arch applies only to gpus, got %s on a %s", i, n.Name, n.Arch, n.Kind), false, i)
		}
	}
	if ngpu == 0 {
		return nil, newErr(ErrInvalid, "no gpu among %d nodes: a topology needs at least one", len(nodes))
	}
	if err := checkUniqueNames(nodes); err != nil {
		return nil, err
	}
	t.gpus = make([]int, 0, ngpu)
	for i, n := range nodes {
		if n.Kind == GPU {
			t.gpus = append(t.gpus, i)
		}
	}
	for i, l := range links {
		if l.A < 0 || l.A >= len(nodes) || l.B < 0 || l.B >= len(nodes) {
			return nil, at(newErr(ErrInvalid, "link %d (%s): endpoint out of range: a=%d b=%d, nodes are 0..%d", i, t.linkLabel(i), l.A, l.B, len(nodes)-1), true, i)
		}
		if l.A == l.B {
			return nil, at(newErr(ErrInvalid, "link %d (%s): self-loop on node %d", i, t.linkLabel(i), l.A), true, i)
		}
		if !(l.BW > 0) || math.IsInf(l.BW, 1) {
			why := ""
			if math.IsInf(l.BW, 1) {
				why = " (inf is for a node's reduction bandwidth, reduce:, not a link's rate)"
			}
			return nil, at(newErr(ErrInvalid, "link %d (%s): bandwidth must be > 0 and finite, got %v%s", i, t.linkLabel(i), l.BW, why), true, i)
		}
		if !(l.Latency >= 0) || l.Latency > MaxLatency {
			return nil, at(newErr(ErrInvalid, "link %d (%s): latency must be between 0 and %gs, got %vs", i, t.linkLabel(i), MaxLatency, l.Latency), true, i)
		}
	}
	if err := t.buildAdjacency(); err != nil {
		return nil, err
	}
	if err := t.checkConnected(); err != nil {
		return nil, err
	}
	return t, nil
}

// WithCapacities is t with other capacities: nodes and links as t's but
// for the nodes' ReduceBW and the links' BW, validated as New does. It
// routes as t does (routes follow latencies, hops and the kinds of nodes,
// never bandwidth), so it shares t's route cache: a simulator that thins
// a fabric's bandwidths searches its routes once. It keeps HostCPU and
// NICPorts. Nodes or links that differ in anything else are an error.
func (t *Topology) WithCapacities(name string, nodes []Node, links []Link) (*Topology, error) {
	if !t.built() {
		return nil, newErr(ErrInvalid, "with capacities: topology was not built with New")
	}
	if len(nodes) != len(t.Nodes) || len(links) != len(t.Links) {
		return nil, newErr(ErrInvalid, "with capacities: %d nodes and %d links, want %s's %d and %d", len(nodes), len(links), t.Name, len(t.Nodes), len(t.Links))
	}
	for i, n := range nodes {
		if m := t.Nodes[i]; n.Name != m.Name || n.Kind != m.Kind || n.Arch != m.Arch {
			return nil, newErr(ErrInvalid, "with capacities: node %d (%s) differs from %s's (%s) in more than its reduce bandwidth", i, n.Name, t.Name, m.Name)
		}
	}
	for i, l := range links {
		if m := t.Links[i]; l.A != m.A || l.B != m.B || l.Latency != m.Latency {
			return nil, newErr(ErrInvalid, "with capacities: link %d differs from %s's in more than its bandwidth", i, t.Name)
		}
	}
	u, err := New(name, nodes, links)
	if err != nil {
		return nil, err
	}
	u.HostCPU, u.NICPorts, u.routing = t.HostCPU, t.NICPorts, t.routing
	return u, nil
}

// checkName accepts non-empty printable UTF-8 names of at most MaxNameBytes
// bytes; the empty string is refused by the callers that need it non-empty.
func checkName(s string) error {
	if len(s) > MaxNameBytes {
		return fmt.Errorf("name is %d bytes, more than the limit of %d", len(s), MaxNameBytes)
	}
	if !utf8.ValidString(s) {
		return errors.New("name is not valid UTF-8")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("name has the unprintable character %U", r)
		}
	}
	return nil
}

// clipName keeps only a name's first 64 bytes (whole characters), and an
// ellipsis, where it is longer: a one-line error that echoed a name of a
// thousand characters would bury its reason.
func clipName(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// checkUniqueNames reports empty names and the first duplicate (by the
// higher index of the pair) without building a map.
func checkUniqueNames(nodes []Node) error {
	for i, n := range nodes {
		if n.Name == "" {
			return at(newErr(ErrInvalid, "node %d: empty name", i), false, i)
		}
	}
	idx := make([]int32, len(nodes))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := strings.Compare(nodes[a].Name, nodes[b].Name); c != 0 {
			return c
		}
		return int(a - b)
	})
	first, second := -1, -1
	for k := 1; k < len(idx); k++ {
		a, b := idx[k-1], idx[k]
		if nodes[a].Name == nodes[b].Name && (second < 0 || int(b) < second) {
			first, second = int(a), int(b)
		}
	}
	if second >= 0 {
		return at(newErr(ErrInvalid, "node %d (%s): duplicate name, already used by node %d", second, nodes[second].Name, first), false, second)
	}
	return nil
}

// linkLabel names link i by its endpoints, "#N" for an endpoint out of range.
func (t *Topology) linkLabel(i int) string {
	if i < 0 || i >= len(t.Links) {
		return fmt.Sprintf("link#%d", i)
	}
	l := t.Links[i]
	return t.nodeLabel(l.A) + "-" + t.nodeLabel(l.B)
}

func (t *Topology) nodeLabel(v int) string {
	if v < 0 || v >= len(t.Nodes) {
		return fmt.Sprintf("#%d", v)
	}
	return t.Nodes[v].Name
}

// buildAdjacency fills the CSR adjacency (non-leaf neighbours, then leaf
// neighbours, each sorted by index) and refuses parallel links.
func (t *Topology) buildAdjacency() error {
	n := len(t.Nodes)
	start := make([]int32, n+1)
	for _, l := range t.Links {
		start[l.A+1]++
		start[l.B+1]++
	}
	for v := 0; v < n; v++ {
		start[v+1] += start[v]
	}
	adj := make([]adjItem, 2*len(t.Links))
	fill := make([]int32, n)
	copy(fill, start[:n])
	for i, l := range t.Links {
		adj[fill[l.A]] = adjItem{nbr: int32(l.B), edge: int32(2 * i)}
		fill[l.A]++
		adj[fill[l.B]] = adjItem{nbr: int32(l.A), edge: int32(2*i + 1)}
		fill[l.B]++
	}
	leaf := func(v int32) bool { return start[v+1]-start[v] == 1 }
	split := make([]int32, n)
	for v := 0; v < n; v++ {
		seg := adj[start[v]:start[v+1]]
		slices.SortFunc(seg, func(a, b adjItem) int {
			if la, lb := leaf(a.nbr), leaf(b.nbr); la != lb {
				if la {
					return 1
				}
				return -1
			}
			if a.nbr != b.nbr {
				return int(a.nbr - b.nbr)
			}
			return int(a.edge - b.edge)
		})
		split[v] = start[v+1]
		for k := range seg {
			if leaf(seg[k].nbr) {
				split[v] = start[v] + int32(k)
				break
			}
		}
		for k := 1; k < len(seg); k++ {
			if seg[k].nbr == seg[k-1].nbr {
				i, j := int(seg[k-1].edge/2), int(seg[k].edge/2)
				return at(newErr(ErrInvalid, "link %d (%s): parallel to link %d between the same nodes; merge them into one link with the summed bandwidth", j, t.linkLabel(j), i), true, j)
			}
		}
	}
	t.adjStart, t.adjLeaf, t.adj = start, split, adj
	return nil
}

// checkConnected walks the graph breadth-first (gonum traverse) from the
// first GPU and names the first node, in index order, it does not reach.
func (t *Topology) checkConnected() error {
	seen := make([]bool, len(t.Nodes))
	count := 0
	bf := traverse.BreadthFirst{Visit: func(n graph.Node) {
		seen[n.ID()] = true
		count++
	}}
	bf.Walk(fullGraph{t}, gnode(t.gpus[0]), nil)
	if count == len(t.Nodes) {
		return nil
	}
	for v, ok := range seen {
		if !ok {
			return at(newErr(ErrInvalid, "disconnected: node %d (%s) is not reachable from %s (node %d)", v, t.Nodes[v].Name, t.Nodes[t.gpus[0]].Name, t.gpus[0]), false, v)
		}
	}
	return nil
}

// built reports whether t was made by New.
func (t *Topology) built() bool {
	return t != nil && t.adjStart != nil && len(t.adjStart) == len(t.Nodes)+1 && len(t.adj) == 2*len(t.Links)
}

// GPUs returns the node indices of the GPUs in Nodes order: rank r is
// GPUs()[r]. The slice is shared, not copied: do not modify it.
func (t *Topology) GPUs() []int {
	if t == nil {
		return nil
	}
	return t.gpus[:len(t.gpus):len(t.gpus)]
}

// NumGPUs returns the number of GPUs, that is, of ranks.
func (t *Topology) NumGPUs() int {
	if t == nil {
		return 0
	}
	return len(t.gpus)
}

// NumEdges returns the number of directed edges, 2*len(Links). Edge ids run
// from 0 to NumEdges()-1: link i forward (A->B) is edge 2*i, reverse (B->A)
// is edge 2*i+1.
func (t *Topology) NumEdges() int {
	if t == nil {
		return 0
	}
	return 2 * len(t.Links)
}

// EdgeBW returns the bandwidth of a directed edge in bytes per second, or 0
// for an edge id out of range.
func (t *Topology) EdgeBW(edge int) float64 {
	if t == nil || edge < 0 || edge/2 >= len(t.Links) {
		return 0
	}
	return t.Links[edge/2].BW
}

// EdgeLatency returns the latency of a directed edge in seconds, or 0 for an
// edge id out of range.
func (t *Topology) EdgeLatency(edge int) float64 {
	if t == nil || edge < 0 || edge/2 >= len(t.Links) {
		return 0
	}
	return t.Links[edge/2].Latency
}

// EdgeEnds returns the node a directed edge leaves and the node it enters,
// or (-1, -1) for an edge id out of range.
func (t *Topology) EdgeEnds(edge int) (from, to int) {
	if t == nil || edge < 0 || edge/2 >= len(t.Links) {
		return -1, -1
	}
	l := t.Links[edge/2]
	if edge%2 == 0 {
		return l.A, l.B
	}
	return l.B, l.A
}

// EdgeName returns "from->to" with node names, for traces and messages.
func (t *Topology) EdgeName(edge int) string {
	from, to := t.EdgeEnds(edge)
	if from < 0 {
		return fmt.Sprintf("edge#%d", edge)
	}
	return t.nodeLabel(from) + "->" + t.nodeLabel(to)
}

package nccl

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// Algo is one of NCCL's algorithms, in NCCL's own order.
type Algo uint8

const (
	Tree Algo = iota
	Ring
	CollNetDirect
	CollNetChain
	NVLS
	NVLSTree
	PAT
	numAlgos
)

var algoNames = [numAlgos]string{"tree", "ring", "collnet-direct", "collnet-chain", "nvls", "nvlstree", "pat"}

func (a Algo) String() string {
	if a < numAlgos {
		return algoNames[a]
	}
	if a == P2P {
		return "p2p"
	}
	return fmt.Sprintf("algo(%d)", uint8(a))
}

// ParseAlgo reads an algorithm name as NCCL_ALGO spells it, in any case
// ("ring", "tree", "nvls", "nvlstree", "CollNetDirect", "pat", …), or
// as commsim does ("collnet-direct", "collnet_direct").
func ParseAlgo(s string) (Algo, error) {
	bare := strings.NewReplacer("_", "", "-", "")
	t := bare.Replace(strings.ToLower(strings.TrimSpace(s)))
	for a := range numAlgos {
		if t == bare.Replace(algoNames[a]) {
			return a, nil
		}
	}
	return 0, fmt.Errorf("nccl: unknown algorithm %q (want one of %s)", s, strings.Join(algoNames[:], ", "))
}

// The protocols, in NCCL's order; index into the tables below.
const (
	ll = iota
	ll128
	simple
	numProtos
)

var protocols = [numProtos]ops.Protocol{ops.ProtoLL, ops.ProtoLL128, ops.ProtoSimple}

func protoIndex(p ops.Protocol) (int, bool) {
	for i, q := range protocols {
		if q == p {
			return i, true
		}
	}
	return 0, false
}

// Version is an NCCL release, 2.18 to 2.30, as 200 + its minor number.
// The model has the constants of the releases NCCL-MODEL.md §10 reads
// (2.18, 2.21, 2.23, 2.27, 2.28 and 2.30); a release between them takes
// the constants of the last before it, and the behaviours read from a
// release's source by release (2.28 has 2.30's tuning but not NVLSTree's
// tree correction on Blackwell, and splits point-to-point operations,
// and gives a peer across the network its channels, as 2.23 to 2.27 do).
type Version int

// The releases whose constants the model has (NCCL-MODEL.md §10).
const (
	V2_18 Version = 218
	V2_21 Version = 221
	V2_23 Version = 223
	V2_27 Version = 227
	V2_28 Version = 228
	V2_30 Version = 230
)

// versionRE is a release as NCCL and its users write it: 2.N, 2.N.P, and
// a build after "-" or "+" (2.21.5-1, 2.29.7+cuda12.9).
var versionRE = regexp.MustCompile(`^2\.([1-9][0-9]{0,2})(?:\.[0-9]{1,4})?(?:[-+][0-9A-Za-z.+-]*)?$`)

// ParseVersion reads "2.30", "2.27.3", "2.18" and so on; a release past
// 2.30 takes 2.30's constants.
func ParseVersion(s string) (Version, error) {
	v, err := ParseRelease(s)
	return min(V2_30, v), err
}

// ParseRelease reads a release as ParseVersion does, but as written: one
// past 2.30 is itself (2.31 is 231), whose constants the model does not
// have.
func ParseRelease(s string) (Version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("nccl: version %q: want 2.N or 2.N.P (2.18 to 2.30)", s)
	}
	minor, _ := strconv.Atoi(m[1]) // at most three digits
	if minor < 18 {
		return 0, fmt.Errorf("nccl: version %q is older than 2.18, whose constants the model does not have", s)
	}
	return Version(200 + minor), nil
}

// String is the release as NCCL writes it ("2.30"), or Version(N) for a
// value that is no 2.x release (Options' 0, say).
func (v Version) String() string {
	if v <= 200 {
		return fmt.Sprintf("Version(%d)", int(v))
	}
	return fmt.Sprintf("2.%d", int(v)-200)
}

// Base latency in µs, per algorithm and protocol, once per operation
// (tuning.cc:150-155, NCCL 2.30).
var baseLat = [numAlgos][numProtos]float64{
	Tree:          {6.8, 14.0, 8.4},
	Ring:          {6.6, 14.0, 8.4},
	CollNetDirect: {0, 0, 0},
	CollNetChain:  {0, 0, 0},
	NVLS:          {0, 0, 0},
	NVLSTree:      {0, 0, 0},
	PAT:           {8.0, 8.0, 8.0},
}

// Hardware latency in µs per hop, by path class (NVLink, PCI, network),
// algorithm and protocol (tuning.cc:157-176, NCCL 2.30). Algorithms that
// run only Simple have the Simple figure for all three.
var hwLat = [ops.NumPathClasses][numAlgos][numProtos]float64{
	ops.PathNVLink: {
		Tree: {0.6, 1.25, 4.0}, Ring: {0.6, 1.9, 3.4}, CollNetDirect: {3.7, 3.7, 3.7}, CollNetChain: {2.8, 2.8, 2.8},
		NVLS: {25, 25, 25}, NVLSTree: {25, 25, 25}, PAT: {4.0, 4.0, 4.0},
	},
	ops.PathPCI: {
		Tree: {1.0, 1.9, 4.0}, Ring: {1.0, 2.5, 5.7}, CollNetDirect: {3.7, 3.7, 3.7}, CollNetChain: {2.8, 2.8, 2.8},
		NVLS: {0, 0, 0}, NVLSTree: {0, 0, 0}, PAT: {4.0, 4.0, 4.0},
	},
	ops.PathNet: {
		Tree: {5.0, 8.5, 14}, Ring: {2.7, 4.0, 14.0}, CollNetDirect: {31, 31, 31}, CollNetChain: {30, 30, 30},
		NVLS: {18, 18, 18}, NVLSTree: {20.9, 20.9, 20.9}, PAT: {14, 14, 14},
	},
}

// Per-channel caps in GB/s by architecture (Volta, Ampere, Hopper,
// Blackwell) and by nodes (one, two, more).
type capTable [4][3]float64

// capSet is one release's caps: LL's total and the per-channel ones.
type capSet struct{ llMax, ringLL128, treeLL128, tree, nvlsTree capTable }

// caps230 is 2.30's caps (tuning.cc:177-211, llMaxBws and perChMax*Bws);
// capsOf gives other releases'.
var caps230 = capSet{
	llMax:     capTable{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282, 90, 70}},
	ringLL128: capTable{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}},
	treeLL128: capTable{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}},
	tree:      capTable{{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}},
	nvlsTree:  capTable{{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5}, {0, 96.0, 80.0}},
}

// capsOf is release v's caps (tuning.cc, by tag). Before 2.25 NCCL has
// no Blackwell row and a Blackwell GPU takes Hopper's; 2.25 to 2.27 give
// it twice Hopper's; 2.28 (at 2.28.9) and 2.29 their own ring LL128 and
// NVLSTree figures. Before 2.21 Hopper's LL cap on one node is Ampere's.
func capsOf(v Version) capSet {
	c := caps230
	const hopper, blackwell = 2, 3
	switch {
	case v < v2_25:
		for _, t := range []*capTable{&c.llMax, &c.ringLL128, &c.treeLL128, &c.tree, &c.nvlsTree} {
			t[blackwell] = t[hopper]
		}
	case v < V2_28:
		c.ringLL128[blackwell] = [3]float64{2 * 36.7, 2 * 36.7, 2 * 36.7}
		c.treeLL128[blackwell] = [3]float64{2 * 36.7, 2 * 36.7, 2 * 29.0}
		c.tree[blackwell] = [3]float64{2 * 38.7, 2 * 41.4, 2 * 36.0}
	case v < v2_29:
		c.ringLL128[blackwell] = [3]float64{2 * 36.7, 34.6, 2 * 36.7}
		c.nvlsTree[blackwell][2] = 43.8
	case v < V2_30:
		c.ringLL128[blackwell] = [3]float64{34.5, 34.6, 34.5}
		c.nvlsTree[blackwell][2] = 43.8
	}
	if v < V2_21 {
		c.llMax[hopper] = c.llMax[1]
	}
	return c
}

// archRow is an architecture's row in the cap tables.
func archRow(a topology.Arch) int {
	switch a {
	case topology.Volta:
		return 0
	case topology.Ampere:
		return 1
	case topology.Blackwell:
		return 3
	}
	return 2
}

// nodesColumn is the cap tables' column for a number of nodes.
func nodesColumn(nodes int) int {
	switch {
	case nodes <= 1:
		return 0
	case nodes == 2:
		return 1
	}
	return 2
}

// nvlinkPerLink is NCCL's bandwidth of one NVLink in GB/s, by
// architecture (topo.h: SM70 20.0, SM80 20.0, SM90 20.6, SM100 40.1).
func nvlinkPerLink(a topology.Arch) float64 {
	switch a {
	case topology.Volta, topology.Ampere:
		return 20.0
	case topology.Blackwell:
		return 40.1
	}
	return 20.6
}

// nvlsEfficiency is the share of NVLink bandwidth NVLS achieves
// (tuning.cc:138-144): 0.85 on Hopper, 0.74 on Blackwell, none before.
func nvlsEfficiency(a topology.Arch) float64 {
	switch a {
	case topology.Hopper:
		return 0.85
	case topology.Blackwell:
		return 0.74
	}
	return 0
}

// speedLadder is the per-channel speeds in GB/s the ring search tries,
// highest first (search.cc:1051-1067).
func speedLadder(a topology.Arch) []float64 {
	switch a {
	case topology.Blackwell:
		return []float64{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18}
	case topology.Hopper:
		return []float64{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3}
	}
	return []float64{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3}
}

// interLadder is the per-channel speeds in GB/s the search tries on
// several nodes, highest first (search.cc:1051-1067).
func interLadder(a topology.Arch) []float64 {
	switch a {
	case topology.Blackwell:
		return []float64{96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	case topology.Hopper:
		return []float64{48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	}
	return []float64{48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12}
}

// atMost is the highest speed of ladder (highest first) not above x, or
// its lowest.
func atMost(ladder []float64, x float64) float64 {
	for _, s := range ladder {
		if s <= x {
			return s
		}
	}
	return ladder[len(ladder)-1]
}

// maxRingChannels is the most channels a ring search makes (MAXCHANNELS/2).
const maxRingChannels = 32

// searchChannels approximates NCCL's ring search over a node whose GPUs
// each have total GB/s of NVLink: the first ladder speed a channel can
// carry, as many channels as the bandwidth holds, then NCCL's doubling of
// fast channels (dupChannels).
func searchChannels(a topology.Arch, total float64) (channels int, speed float64) {
	speed = atMost(speedLadder(a), total)
	channels = min(maxRingChannels, max(1, int(total/speed)))
	return dupChannels(a, channels, speed, maxRingChannels)
}

// netSearchChannels approximates NCCL's ring search across nodes
// (search.cc, ncclTopoCompute): each channel crosses on one NIC, so the
// first speed tried is the highest on the inter-node ladder that the path
// from a GPU to its NIC carries (the NIC, or the PCIe link before it,
// whichever is slower); a NIC takes as many channels as its bandwidth
// holds at that speed, and the node's NVLinks (where a node has several
// GPUs) all of them. Slower speeds are tried while they are above 0.49
// of the best found, and one replaces it only with more bandwidth in
// all. Then NCCL doubles fast channels as on one node (dupChannels). On
// DGX B200s: 8 channels of 48 GB/s
// (PCIe Gen5's 48 under NDR's 50; not doubled, as Blackwell doubles
// channels under 50 GB/s only up to 4).
func netSearchChannels(s System) (channels int, speed float64) {
	path := s.nicPathBW()
	for _, sp := range interLadder(s.Arch) {
		if sp > path {
			continue
		}
		if channels > 0 && sp/speed <= 0.49 {
			break
		}
		ch := min(maxRingChannels, max(1, s.NICs)*max(1, int(s.NICBW/sp)))
		for s.PerNode > 1 && ch > 1 && float64(ch)*sp > s.IntraBW {
			ch--
		}
		if float64(ch)*sp > float64(channels)*speed {
			channels, speed = ch, sp
		}
	}
	if channels == 0 { // a NIC slower than every speed: the lowest, once
		ladder := interLadder(s.Arch)
		channels, speed = 1, ladder[len(ladder)-1]
	}
	return dupChannels(s.Arch, channels, speed, maxRingChannels)
}

// dupChannels is NCCL's doubling of fast channels after its search
// (search.cc:1036-1049, ncclTopoDupChannels): each of twice as many, up
// to the search's most, at half the speed, where a channel carries 25
// GB/s or more, except on GPUs past Ampere at under 50 GB/s with more
// than 4 channels.
func dupChannels(a topology.Arch, channels int, speed float64, most int) (int, float64) {
	if channels < most && speed >= 25 && !(a.SM() > 80 && speed < 50 && channels > 4) {
		return min(2*channels, most), speed / 2
	}
	return channels, speed
}

// collChannels is how many channels NCCL's rings and trees run on
// (connect.cc, ncclTopoPostset): twice the ring search's (every ring and
// tree is duplicated after the search: "24 coll channels" on 8 H100s
// whose search found 12); half as many again where CollNet runs on nodes
// of several GPUs whose chains within a node are faster than the network
// ("to saturate intra-node bandwidth"); twice that on Hopper across nodes
// while under 16 where a ring channel runs over 45 GB/s ("4 compute
// channels per search channel to reach peak BW on <8 PPN": from 2.25 on
// Blackwell too, and before 2.20 up to 64 channels); then
// NCCL_MAX_NCHANNELS lowers them and NCCL_MIN_NCHANNELS raises them,
// copying channels, and so do NCCL_MAX_CTAS and NCCL_MIN_CTAS.
func collChannels(s System, o Options) int {
	n, _ := collLayout(s, o)
	return n
}

// collLayout is collChannels' count, and where each of the copies NCCL
// makes past its duplication starts (connect.cc, copyChannels: channel c
// from a start on is channel c−start as it stood), in the order made, 0
// where none is: CollNet's half again, the doubling, and
// NCCL_MIN_NCHANNELS past NCCL_MAX_NCHANNELS. A tree channel runs the
// tree of the channel it copies (ops.Spec.TreeCopies).
func collLayout(s System, o Options) (n int, copies [3]int) {
	ring := bandwidths(s, Ring)
	n = min(maxChannels, 2*ring.channels)
	if o.collNetOff(s) == "" && s.PerNode > 1 {
		if chain := bandwidths(s, CollNetChain); chain.intra > chain.inter {
			copies[0] = n
			n = min(maxChannels, n+n/2)
		}
	}
	v, sm := o.Release(), s.Arch.SM()
	arch := sm == 90 || sm > 90 && v >= v2_25
	room := n < 16
	if v < v2_20 {
		room = 2*n <= maxChannels
	}
	if s.Nodes > 1 && arch && ring.intra > 45 && room {
		copies[1] = n
		n *= 2
	}
	lo, hi := o.MinChannels, o.MaxChannels
	if o.Channels > 0 {
		lo, hi = o.Channels, o.Channels
	}
	loCTAs, hiCTAs := o.ctas()
	if hi == 0 || hiCTAs < hi {
		hi = hiCTAs
	}
	n = min(n, hi)
	if most := max(lo, loCTAs); most > n {
		copies[2] = n
		n = most
	}
	return n, copies
}

// ctas are the bounds NCCL_MIN_CTAS and NCCL_MAX_CTAS put on every
// channel count NCCL sets up (the communicator's config; init.cc lowers
// the least to the most where it is above).
func (o Options) ctas() (lo, hi int) {
	lo, hi = o.MinCTAs, maxChannels
	if o.MaxCTAs > 0 {
		hi = o.MaxCTAs
	}
	return min(lo, hi), hi
}

// clampCTAs bounds a channel count by NCCL_MIN_CTAS and NCCL_MAX_CTAS.
func clampCTAs(n int, o Options) int {
	lo, hi := o.ctas()
	return max(lo, min(hi, n))
}

// Releases where a behaviour changes between those whose constants the
// model has.
const (
	v2_19 Version = 219
	v2_20 Version = 220
	v2_22 Version = 222
	v2_24 Version = 224
	v2_25 Version = 225
	v2_29 Version = 229
)

// netOverhead is the per-step network overhead in µs on several nodes
// (tuning.cc:225-233): 1 on Intel and others, 2 on AMD.
func netOverhead(c topology.CPUVendor) float64 {
	if c == topology.AMDCPU {
		return 2
	}
	return 1
}

// llMaxBw is the LL bandwidth cap in GB/s: by architecture on one node,
// by CPU vendor (Intel row 0, AMD row 1) on several (tuning.cc:268-272).
func llMaxBw(s System, v Version) float64 {
	row := archRow(s.Arch)
	if s.Nodes > 1 {
		row = 0
		if s.CPU == topology.AMDCPU {
			row = 1
		}
	}
	return capsOf(v).llMax[row][nodesColumn(s.Nodes)]
}

// finite reports whether x is a usable positive number.
func finite(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

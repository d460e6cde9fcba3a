package nccl

import (
	"errors"
	"fmt"
	"math"

	"github.com/commsim/commsim/topology"
)

// System is what NCCL's topology search sees of a fabric.
type System struct {
	Ranks, Nodes, PerNode int
	// NodeMajor says that node k holds ranks k·PerNode … (k+1)·PerNode−1,
	// which rings need to keep to one rail per crossing.
	NodeMajor bool
	Arch      topology.Arch      // the GPUs' (Hopper when the fabric does not say)
	CPU       topology.CPUVendor // the hosts' (Intel when the fabric does not say)
	// NVLinks is how many NVLinks a GPU has to its node's NVSwitch or
	// peers; IntraBW is what NCCL expects of them, in GB/s (NVLinks ×
	// NCCL's per-link figure), and LinkBW their line rate in bytes/s. A
	// node joined by PCIe only has no NVLinks, and IntraBW is its PCIe
	// bandwidth.
	NVLinks int
	IntraBW float64
	LinkBW  float64
	// NICs per node and each one's bandwidth in GB/s, on several nodes,
	// and the PCIe link before a NIC as NCCL rates it (topo.cc: lanes ×
	// a per-lane figure that is 3/4 of the lane's rate: 48 GB/s for Gen5
	// x16, 24 for Gen4), 0 when the fabric does not say.
	NICs   int
	NICBW  float64
	PCIeBW float64
	// NICsOnCPU: a node's NICs hang off a host CPU, not its GPUs, so
	// a GPU reaches the network through the CPU (NCCL's PHB path).
	NICsOnCPU bool
	// NVSwitch: a GPU's NVLinks go to a switch; NVLSCapable: that switch
	// reduces (NVLink SHARP); SHARP: the network's switches do (CollNet).
	NVSwitch, NVLSCapable, SHARP bool
	// SHARPOff says why the network's reducing switches cannot reduce
	// CollNet's groups, "" where they can or where SHARP is off (see
	// sharpOff).
	SHARPOff string
	// ReduceBW is what a GPU reduces, in bytes/s (the fabric's; +Inf
	// free). NCCL's search does not read it; a one-rank call copies at
	// a rate it gives (oneRankCopy).
	ReduceBW float64
}

// check refuses a System that Describe would not give: no ranks, nodes
// that do not hold them, or a bandwidth that is negative or no number.
func (s System) check() error {
	if s.Ranks < 1 || s.Nodes < 1 || s.PerNode < 1 || s.Nodes*s.PerNode != s.Ranks || s.NVLinks < 0 || s.NICs < 0 {
		return fmt.Errorf("nccl: system of %d ranks on %d nodes of %d, %d NVLinks and %d NICs a GPU: want nodes of as many ranks that hold them all (Describe gives one)",
			s.Ranks, s.Nodes, s.PerNode, s.NVLinks, s.NICs)
	}
	if s.Arch == topology.UnknownArch {
		// NCCL's rules read the architecture (its caps, ladders, LL128
		// and channel doubling): an unknown one would be Hopper in some
		// and not in others.
		return fmt.Errorf("nccl: system %s: no GPU architecture: set Arch (Describe gives Hopper where the fabric does not say)", s)
	}
	for _, bw := range []float64{s.IntraBW, s.LinkBW, s.NICBW, s.PCIeBW, s.ReduceBW} {
		if !(bw >= 0) {
			return fmt.Errorf("nccl: system %s: a bandwidth of %v: want 0 or more", s, bw)
		}
	}
	return nil
}

// nicPathBW is what the path from a GPU to its NIC carries in GB/s, as
// NCCL rates it: the NIC, or the PCIe link before it where slower.
func (s System) nicPathBW() float64 {
	if s.PCIeBW > 0 {
		return min(s.NICBW, s.PCIeBW)
	}
	return s.NICBW
}

// sameChannels reports whether NCCL's ring search keeps one pattern for
// every channel (search.cc, graph->sameChannels). It tries that first,
// each channel replaying the last one's GPUs, and keeps it where the
// pattern fills the fabric: on one node, and across nodes where a node has
// one NIC, or one GPU. Where a node's NICs hang off its GPUs' PCIe
// switches, more than one a node, a replayed channel cannot start at
// another NIC's GPU, the search falls short of the NICs' bandwidth and
// runs again with channels of their own, each entering and leaving a node
// on its own rail, as commsim's rings do. Taken to keep one pattern: NICs
// on the host CPU, which every GPU reaches alike, so that a replay may
// find another (a guess: no published run says), and GPUs joined through
// AMD hosts only, where the search never tries channels of their own
// ("except when going through AMD CPUs"). A published 4 × 8 H100
// broadcast and reduce (NCCL 2.24.3, held out) bear the rule out: LL128
// to 256 MiB and Simple from 512 MiB, where a ring whose channels differ
// makes Simple's latency 32 × 14 µs and the two cross at 477 MiB, and one
// pattern would have taken Simple from 8 MiB.
func (s System) sameChannels() bool {
	amdPCIe := s.CPU == topology.AMDCPU && s.NVLinks == 0
	return s.Nodes == 1 || s.PerNode == 1 || s.NICs <= 1 || s.NICsOnCPU || amdPCIe
}

// netHeads is how many GPUs of a node NCCL's NVLS and CollNet direct
// searches can make heads across nodes: GPUs with a NIC of their own, one
// head a GPU however many NICs it has (search.cc drops a duplicate head).
// It is taken as the node's NICs, up to its GPUs; none where the NICs
// hang off the host.
func (s System) netHeads() int {
	if s.NICsOnCPU {
		return 0
	}
	return min(s.PerNode, s.NICs)
}

// String says what NCCL sees in a line: "16 ranks on 2 nodes of 8,
// hopper, 18 NVLinks (370.8 GB/s), NVLS, 8 NICs of 50 GB/s, intel hosts".
func (s System) String() string {
	out := fmt.Sprintf("%d ranks on %d node", s.Ranks, s.Nodes)
	if s.Nodes > 1 {
		out += fmt.Sprintf("s of %d", s.PerNode)
	}
	out += ", " + s.Arch.String()
	if s.NVLinks > 0 {
		out += fmt.Sprintf(", %d NVLinks (%.1f GB/s)", s.NVLinks, s.IntraBW)
	} else {
		out += fmt.Sprintf(", PCIe (%.0f GB/s)", s.IntraBW)
	}
	if s.NVLSCapable {
		out += ", NVLS"
	}
	if s.Nodes > 1 {
		out += fmt.Sprintf(", %d NICs of %.0f GB/s", s.NICs, s.NICBW)
		if s.SHARP {
			out += ", SHARP"
		}
	}
	return out + ", " + s.CPU.String() + " hosts"
}

// Describe reads a System from t. GPUs are on one node when they meet
// without crossing a NIC; every node must hold as many.
func Describe(t *topology.Topology) (System, error) {
	gpus := t.GPUs()
	if len(gpus) == 0 {
		return System{}, errors.New("nccl: describe: a fabric without GPUs (a Topology is made by topology.New)")
	}
	s := System{Ranks: len(gpus), Arch: topology.Hopper, CPU: topology.IntelCPU}
	if t.HostCPU != topology.UnknownCPU {
		s.CPU = t.HostCPU
	}
	if a := t.Nodes[gpus[0]].Arch; a != topology.UnknownArch {
		s.Arch = a
	}
	// Nodes: what links other than the network's join.
	parent := make([]int, len(t.Nodes))
	for i := range parent {
		parent[i] = i
	}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for e := range t.Links {
		if t.EdgeClass(2*e) != topology.ClassNet {
			a, b := find(t.Links[e].A), find(t.Links[e].B)
			parent[max(a, b)] = min(a, b)
		}
	}
	nodeOf := map[int]int{} // component → node number, in rank order
	var perNode []int
	for _, g := range gpus {
		root := find(g)
		k, ok := nodeOf[root]
		if !ok {
			k = len(nodeOf)
			nodeOf[root] = k
			perNode = append(perNode, 0)
		}
		perNode[k]++
	}
	s.Nodes = len(nodeOf)
	s.PerNode = s.Ranks / s.Nodes
	for k, n := range perNode {
		if n != perNode[0] {
			return s, fmt.Errorf("nccl: node %d has %d GPUs and node 0 %d: NCCL's model wants nodes alike", k, n, perNode[0])
		}
	}
	s.NodeMajor = nodeMajor(gpus, find, nodeOf, s.PerNode)
	if err := s.readGPU(t, gpus[0]); err != nil {
		return s, err
	}
	s.readNICs(t, gpus, find)
	if s.Nodes > 1 && s.NICBW == 0 {
		return s, fmt.Errorf("nccl: %d nodes, but a node's NICs have no network link (to a switch or another NIC) whose bandwidth NCCL's model could read", s.Nodes)
	}
	return s, nil
}

// nodeMajor checks that rank r is on node r/perNode.
func nodeMajor(gpus []int, find func(int) int, nodeOf map[int]int, perNode int) bool {
	for r, g := range gpus {
		if nodeOf[find(g)] != r/perNode {
			return false
		}
	}
	return true
}

// maxNVLinks bounds the NVLinks a GPU's links may count as (18 on an
// H100 or a B200): past it a link's bandwidth is no fabric's, and its
// count would overflow.
const maxNVLinks = 1 << 20

// readGPU reads a GPU's NVLinks and its switch's reduction.
func (s *System) readGPU(t *topology.Topology, g int) error {
	s.ReduceBW = t.Nodes[g].ReduceBW
	for e := range t.Links {
		l := t.Links[e]
		if l.A != g && l.B != g || t.EdgeClass(2*e) != topology.ClassNVLink {
			continue
		}
		other := l.A + l.B - g
		s.LinkBW += l.BW
		if n := t.Nodes[other]; n.Kind == topology.Switch {
			s.NVSwitch = true
			s.NVLSCapable = s.NVLSCapable || n.ReduceBW > 0
		}
	}
	if rate := s.Arch.NVLinkRate(); rate > 0 && s.LinkBW > 0 {
		links := math.Round(s.LinkBW / rate)
		if links > maxNVLinks {
			return fmt.Errorf("nccl: GPU %s's NVLink bandwidth, %.4g GB/s, is %.4g NVLinks of %.4g GB/s: more than NCCL's model can count (%d)", t.Nodes[g].Name, s.LinkBW/1e9, links, rate/1e9, maxNVLinks)
		}
		s.NVLinks = int(links)
	}
	s.IntraBW = float64(s.NVLinks) * nvlinkPerLink(s.Arch)
	if s.IntraBW == 0 {
		s.IntraBW = pciBW // no NVLink: NCCL's PCIe default (topo.h PCI_BW)
	}
	if s.Arch.SM() < 90 {
		s.NVLSCapable = false
	}
	return nil
}

// pciBW is NCCL's default PCIe bandwidth in GB/s (topo.h PCI_BW).
const pciBW = 12

// readNICs counts node 0's NICs and reads the bandwidth of the NICs,
// whether the network's switches reduce, and whether they can for
// CollNet's groups. The bandwidth is the least that a node's fastest NIC
// has: NCCL's ranks each search their own node and agree on the minimum
// (init.cc: every graph's bandwidths are the least over the ranks).
func (s *System) readNICs(t *topology.Topology, gpus []int, find func(int) int) {
	if s.Nodes < 2 {
		return
	}
	home := find(gpus[0])
	nics, onCPU := map[int]bool{}, map[int]bool{}
	type attachment struct{ nic, node int }
	var attached []attachment  // NICs to the nodes of the GPUs and CPUs they hang off
	netBW := map[int]float64{} // a NIC's network link
	for e := range t.Links {
		l := t.Links[e]
		for _, end := range [2]int{l.A, l.B} {
			other := l.A + l.B - end
			if t.Nodes[end].Kind != topology.NIC {
				continue
			}
			switch kind := t.Nodes[other].Kind; kind {
			case topology.GPU, topology.CPU:
				node := find(other)
				attached = append(attached, attachment{end, node})
				switch {
				case node != home:
				case kind == topology.GPU:
					nics[end] = true
					s.PCIeBW = max(s.PCIeBW, 0.75*l.BW/1e9)
				default:
					onCPU[end] = true
				}
			case topology.Switch, topology.NIC:
				// A NIC's network link, to a switch or cabled to
				// another NIC.
				netBW[end] = max(netBW[end], l.BW/1e9)
				if t.Nodes[other].ReduceBW > 0 {
					s.SHARP = true
				}
			}
		}
	}
	if s.SHARP {
		s.SHARPOff = sharpOff(t, gpus, find, s.PerNode)
	}
	if len(nics) == 0 && len(onCPU) > 0 {
		s.NICsOnCPU, nics = true, onCPU
	}
	fastest := map[int]float64{} // by node
	for _, a := range attached {
		fastest[a.node] = max(fastest[a.node], netBW[a.nic])
	}
	least := math.Inf(1)
	for _, bw := range fastest {
		least = min(least, bw)
	}
	if len(fastest) > 0 {
		s.NICBW = least
	}
	s.NICs = max(1, len(nics))
	if ports := t.NICPorts; ports > 1 {
		// NCCL finds each port a NIC of its own, with its share of the
		// link.
		s.NICs *= ports
		s.NICBW /= float64(ports)
	}
}

// sharpOff says why the network's reducing switches cannot reduce what
// CollNet (and NVLS across nodes) gives them as the simulator runs it, ""
// where they can: for the GPUs at each place of their nodes (a channel's
// heads, one a node), the switch the simulator would reduce on
// (topology.ReducingSwitch: their NICs, one each, on one reducing
// switch; a rail-optimised fabric's rail leaf).
func sharpOff(t *topology.Topology, gpus []int, find func(int) int, perNode int) string {
	places := make([][]int, perNode) // the ranks at each place, node by node
	counted := map[int]int{}
	for r, g := range gpus {
		node := find(g)
		if j := counted[node]; j < perNode {
			places[j] = append(places[j], r)
		}
		counted[node]++
	}
	for _, ranks := range places {
		if _, err := t.ReducingSwitch(ranks); err != nil {
			return "SHARP cannot reduce for CollNet's heads: " + err.Error()
		}
	}
	return ""
}

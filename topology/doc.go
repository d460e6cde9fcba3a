// Package topology describes GPU fabrics for the commsim simulator: which
// GPUs, switches, NICs and CPUs there are, how they are linked, and which
// way a message between two of them travels.
//
// # Model
//
// A Topology is an undirected graph. Nodes have a Kind (gpu, switch, nic,
// cpu); GPUs also have a reduce bandwidth: a reduce of s bytes takes
// s/ReduceBW seconds, and +Inf makes it free. A switch may have one too,
// for in-network reduction (NVLS on an NVSwitch, SHARP on an InfiniBand
// switch): it combines the contributions of several GPUs, s bytes each,
// into s bytes that it multicasts back, at ReduceBW bytes of result per
// second whatever the number of contributions; 0 means it cannot. A GPU
// may have an Arch (volta, ampere, hopper, blackwell) and the topology a
// HostCPU vendor (intel, amd, arm); both are unknown unless set. A Link
// joins two nodes and is
// full duplex: BW is the bandwidth of each direction in bytes per second, and
// Latency is the one-way latency in seconds. At most one link joins two
// nodes; to model several physical links, use one link with the summed
// bandwidth. Each link i gives two directed edges: 2*i from A to B and
// 2*i+1 from B to A; the simulator shares bandwidth per directed edge.
//
// Ranks are the GPUs in the order they appear in Nodes: rank r is node
// GPUs()[r].
//
// # What NCCL sees
//
// NCCL's cost model (NCCL-MODEL.md) reads a handful of hardware facts. A
// fabric carries them as fields where the graph cannot say them, and in
// its links where it can:
//
//	GPU architecture   Node.Arch of each GPU; Arch.SM gives NCCL's number
//	host CPU vendor    Topology.HostCPU
//	NVLinks per GPU    the GPU's link to its NVSwitch carries all of them:
//	                   count = BW / Arch.NVLinkRate() (H100: 450GB/s / 25GB/s = 18)
//	NVLS               the NVSwitch's ReduceBW > 0 (0: none, as on A100);
//	                   ReducingSwitch finds it for a group of GPUs, and
//	                   SwitchCost prices a reduction or multicast through it
//	NICs per GPU       the NIC nodes linked to the GPU (one in every preset),
//	                   each standing for Topology.NICPorts ports (nicports)
//	NIC speed          the NIC's link to its network switch (nicbw), shared
//	                   by its ports
//	PCIe generation    the GPU-NIC link (pciebw): 32GB/s is Gen4 x16, 64GB/s
//	                   Gen5 x16 (REFERENCE.md's rates), 128GB/s Gen6 x16
//	                   (64 GT/s × 16 lanes: the B300 presets' ConnectX-8)
//	rails              with rail=true, NIC g of every node is on leaf
//	                   switch rail<g>, and the leaves on one spine
//	SHARP (CollNet)    the network switches' ReduceBW > 0
//
// NCCL's model also has one per-hop NVLink latency for every generation;
// Arch.NVLinkExtraLatency is what a crossing takes beyond it (0.7 µs on
// Blackwell), which package nccl's wires add and the Blackwell presets'
// GPU-switch links carry.
//
// # Units
//
// Bandwidths are bytes per second. In strings, GB/s means 10^9 bytes per
// second as in nccl-tests, Gb/s means 10^9 bits per second (400Gb/s =
// 50GB/s), GiB/s means 2^30 bytes per second; B/s, kB/s, MB/s, TB/s, PB/s,
// b/s, Kb/s, Mb/s, Tb/s, KiB/s, MiB/s and TiB/s work the same way, and "inf"
// means unlimited (only for reduce). Latencies are seconds; strings take s,
// ms, us (or µs), ns and ps, and "0". Parsing is correctly rounded (the unit
// moves the decimal exponent, it is never a float multiply), and
// FormatBandwidth/FormatLatency write values that parse back bit for bit:
// 468.125ns, 46.5GB/s.
//
// # Spec strings
//
// Parse (and Resolve, and so commsim's --topo) takes KIND:SHAPE[,key=value…]:
//
//	ring:N         GPU i links GPU i+1 mod N (N=1: one GPU, no link; N=2: one link)
//	mesh:N         a link between every pair of GPUs
//	switch:N       every GPU has one link to the switch sw0
//	torus:AxB[xC]  GPUs in row-major order, each linked to its +1 neighbour
//	               in every dimension mod its size (size 2: one link, size 1: none)
//	cluster:MxG    M nodes of G GPUs; see below
//
// cluster:MxG has, per node m, an intra-node switch sw<m> linked to its G GPUs
// (bw, lat); every GPU has its own NIC (gpu<i>-nic<i>, pciebw, pcielat), and
// every NIC one link (nicbw, niclat) to a single non-blocking network switch
// netsw. With rail=true there is instead one rail (leaf) switch per local GPU
// index (the NIC of local GPU g goes to rail<g>), and every rail links to one
// spine switch with bandwidth M×nicbw and latency niclat: a non-blocking
// leaf/spine, where the one spine node stands for all the spine switches
// (a route takes one path, so parallel spines would leave all but the first
// idle). Nodes are ordered gpus, node switches, NICs, then netsw (or rails
// and spine); GPU m*G+g is local GPU g of node m.
//
// Overrides and their defaults for the generic kinds:
//
//	bw=100GB/s     GPU link bandwidth per direction (intra-node in cluster)
//	lat=1us        GPU link latency
//	reduce=inf     GPU reduce bandwidth, a bandwidth or inf (free)
//	arch=unknown   every GPU's architecture: volta, ampere, hopper, blackwell
//	cpu=unknown    the host CPU vendor: intel, amd, arm
//	nvls=off       in-network reduction of the GPUs' switch sw<m> (NVLS on an
//	               NVSwitch): a bandwidth, inf or off (switch, cluster)
//	nicbw=50GB/s   NIC-to-network link: one NDR InfiniBand port, 400Gb/s (cluster)
//	nicports=1     network ports each NIC link stands for, as NCCL's search
//	               counts NICs: nicbw=200Gb/s,nicports=2 is two 100Gb/s
//	               ports a GPU (cluster)
//	niclat=2us     NIC-to-network latency (cluster)
//	pciebw=64GB/s  GPU-to-NIC: PCIe Gen5 x16 per direction (cluster)
//	pcielat=0      GPU-to-NIC latency (cluster)
//	rail=false     rail-optimised network (cluster)
//	sharp=off      in-network reduction of the network switches (netsw, or
//	               the rails and spine; SHARP): a bandwidth, inf or off (cluster)
//
// ring, mesh and torus take bw, lat, reduce, arch and cpu; switch also
// nvls; cluster takes all thirteen. An unknown key, a key that does not apply,
// a key given twice, a malformed value, a non-finite link bandwidth, a
// latency above MaxLatency or a size below 1 is an error that names the key
// and the value. Sizes are limited to MaxNodes nodes and MaxLinks links,
// checked before building.
//
// # Presets
//
// Parse also accepts these names, with the same overrides as the kind they
// are built from (Presets lists them with the source of every number; the
// numbers and their sources are in preset_numbers.go):
//
//	dgx-a100     8 A100 on one switch, 300GB/s, 468.125ns per link, reduce 609GB/s,
//	             ampere, no NVLS, cpu amd
//	dgx-h100     8 H100 on one switch, 450GB/s, 468.125ns per link, reduce 1TB/s,
//	             hopper, NVLS 276GB/s, cpu intel
//	hgx-h200     8 H200 on one switch, 450GB/s, 468.125ns per link, reduce 1.43TB/s,
//	             hopper, NVLS 276GB/s, cpu unknown
//	hgx-b200     8 B200 on one switch, 900GB/s, 468.125ns per link, reduce 2.39TB/s,
//	             blackwell, NVLS 482GB/s, cpu unknown
//	dgx-h100xN   N dgx-h100 nodes as cluster:Nx8, NDR nicbw=50GB/s, niclat=7us,
//	             pciebw=64GB/s, pcielat=0 (rail=true for rail-optimised)
//	dgx-a100xN   N dgx-a100 nodes as cluster:Nx8,rail=true, HDR nicbw=25GB/s,
//	             niclat=7us, pciebw=32GB/s (PCIe Gen4), pcielat=0
//	hgx-h200xN   N hgx-h200 nodes as cluster:Nx8,rail=true, NDR nicbw=50GB/s,
//	             niclat=7us, pciebw=64GB/s, pcielat=0
//	dgx-b200xN   N DGX B200 nodes (hgx-b200 with cpu intel) as
//	             cluster:Nx8,rail=true, NDR nicbw=50GB/s, niclat=7us,
//	             pciebw=64GB/s, pcielat=0
//	gb200-nvl72  72 B200 on one switch, 900GB/s, 468.125ns per link, reduce 2.39TB/s,
//	             blackwell, NVLS 482GB/s, cpu arm
//	gb200-nvl72xN  N gb200-nvl72 racks as cluster:Nx72,rail=true (72 rails),
//	             NDR nicbw=50GB/s, niclat=7us, pciebw=64GB/s, pcielat=0
//	hgx-b300     8 B300 (Blackwell Ultra): hgx-b200's numbers, which NCCL
//	             and the datasheets give it too
//	dgx-b300xN   N DGX B300 nodes (hgx-b300 with cpu intel) as
//	             cluster:Nx8,rail=true, ConnectX-8 nicbw=100GB/s, niclat=7us,
//	             pciebw=128GB/s (PCIe Gen6), pcielat=0
//	gb300-nvl72  72 B300 on one switch: gb200-nvl72's numbers
//	gb300-nvl72xN  N gb300-nvl72 racks as cluster:Nx72,rail=true (72 rails),
//	             ConnectX-8 nicbw=100GB/s, niclat=7us, pciebw=128GB/s, pcielat=0
//	mac-tb5:N    ring of N Macs over Thunderbolt 5, 10GB/s, 10us, reduce 163GB/s
//	h200-virtual:N  N virtual ranks on one H200 (the cuda backend's --placement
//	             virtual): a switch standing for the HBM, 1/N of 1.075TB/s of
//	             messages and of 1.43TB/s of reduction each, 23.3us a link
//	             (a 4-byte message measured 46.6us on an H200)
//
// The single-node NVSwitch presets take the switch keys, the …xN ones the
// cluster keys (rail=false flattens a rail-optimised one; sharp= turns on
// SHARP, which no preset assumes since NCCL uses it only with the CollNet
// plugin); both also take
//
//	gpus=8         the GPUs a job runs on in each node, its first ones, from 1
//	               to the node's count: dgx-h100x10,gpus=1 is ten DGX H100s
//	               running one rank each (srun --ntasks-per-node=1), each GPU
//	               with its own NIC; dgx-h100,gpus=4 is FirstGPUs(dgx-h100, 4)
//
// mac-tb5 and h200-virtual take bw, lat, reduce, arch and cpu.
//
// # Routing
//
// Route and RouteRanks return the shortest path by latency, from one
// Dijkstra search of the package's own (routeSearch) over node states: a
// node, and whether the route has crossed the network yet. A step weighs
//
//	round(latency in picoseconds) + 1/1024
//
// which is exact in float64 for paths under 1024 hops and about 8 s. So
// among equal-latency paths (to the picosecond) the one with fewer hops
// wins; among those the one with fewer NVLink hops after the network
// (cross-rail traffic goes over NVLink first, as NCCL's PXN sends it; the
// rule reads the fabric's shape, not its numbering, so renamings that map
// the fabric onto itself map routes onto routes, which mirrors need); and
// among those the one the search settles first, ordered by node index,
// never by map order. A lat=0 mesh thus still takes the direct link. Nodes
// with a single link are reached only as the destination (they cannot be a
// way through). From a node of many links (a mesh's GPU) to a neighbour
// whose link no way through others can beat (each takes a link out and a
// link in, and a hop more), the route is that link, read without a
// search. Routes are computed on first use and cached per (source,
// destination) behind a mutex; nothing is precomputed per pair, so memory
// stays linear in the size of the fabric. A source's routes to every GPU
// come from the same search run to the end (PathCost's tables), so they
// are Route's routes.
//
// # YAML format
//
// Load, ReadYAML and WriteYAML use this format (also in FORMAT.md):
//
//	name: my-fabric
//	cpu: intel
//	nodes:
//	  - {name: gpu0, kind: gpu, arch: hopper, reduce: 1.43TB/s}
//	  - {name: gpu1, kind: gpu}
//	  - {name: sw0, kind: switch, reduce: 276GB/s}
//	links:
//	  - {a: gpu0, b: sw0, bw: 450GB/s, lat: 468.125ns}
//	  - {a: gpu1, b: sw0, bw: 450GB/s, lat: 468.125ns}
//
// name is optional (default empty), and so is cpu (intel, amd, arm or
// unknown, the default). nodes is a required list; each node needs name and
// kind (gpu, switch, nic, cpu); arch (volta, ampere, hopper, blackwell or
// unknown, the default) is allowed only on gpus; reduce only on gpus, where
// it defaults to inf, and switches, where it defaults to none. links is a
// list (it may be omitted for a single GPU); each link needs a and b (node
// names), bw (per direction, with a unit) and lat (with a unit, or 0). Any
// other field, a field given twice, a missing field, an unknown value, an
// unknown node name or anything New refuses is an error that names the
// element (node 3 (gpu3), link 5 (gpu0-sw0)) and its line. The order of
// nodes is the order of ranks. WriteYAML writes this format so that
// ReadYAML gives back an identical topology, floats bit for bit; it writes
// cpu, arch and a switch's reduce only when they are set.
//
// # Validation
//
// New refuses: no GPU; an empty, duplicate (naming both indices),
// unprintable or overlong name; an unknown kind; a GPU reduce bandwidth that
// is not > 0, a switch reduce bandwidth that is negative or NaN, or a reduce
// bandwidth on a NIC or CPU; an unknown arch, or an arch on a non-GPU; a
// link endpoint out of
// range, a self-loop, a parallel link, a bandwidth that is not > 0 and
// finite, a latency outside [0, MaxLatency]; and a disconnected graph (naming
// a node not reachable from the first GPU; found with gonum's breadth-first
// traversal). Every error wraps one of ErrSpec, ErrInvalid, ErrYAML or
// ErrRoute and names the offending element and value. No input makes this
// package panic.
package topology

// Package topology describes GPU fabrics for the commsim simulator: which
// GPUs, switches, NICs and CPUs there are, how they are linked, and which
// way a message between two of them travels.
//
// # Model
//
// A Topology is an undirected graph. Nodes have a Kind (gpu, switch, nic,
// cpu); GPUs also have a reduce bandwidth: a reduce of s bytes takes
// s/ReduceBW seconds, and +Inf makes it free. A Link joins two nodes and is
// full duplex: BW is the bandwidth of each direction in bytes per second, and
// Latency is the one-way latency in seconds. At most one link joins two
// nodes; to model several physical links, use one link with the summed
// bandwidth. Each link i gives two directed edges: 2*i from A to B and
// 2*i+1 from B to A; the simulator shares bandwidth per directed edge.
//
// Ranks are the GPUs in the order they appear in Nodes: rank r is node
// GPUs()[r].
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
// netsw. With rail=true there is instead one rail switch per local GPU index
// (the NIC of local GPU g goes to rail<g>), and every rail links to one spine
// switch with bandwidth M×nicbw and latency niclat. Nodes are ordered gpus,
// node switches, NICs, then netsw (or rails and spine); GPU m*G+g is local
// GPU g of node m.
//
// Overrides and their defaults for the generic kinds:
//
//	bw=100GB/s     GPU link bandwidth per direction (intra-node in cluster)
//	lat=1us        GPU link latency
//	reduce=inf     GPU reduce bandwidth, a bandwidth or inf (free)
//	nicbw=50GB/s   NIC-to-network link: one NDR InfiniBand port, 400Gb/s (cluster)
//	niclat=2us     NIC-to-network latency (cluster)
//	pciebw=64GB/s  GPU-to-NIC: PCIe Gen5 x16 per direction (cluster)
//	pcielat=0      GPU-to-NIC latency (cluster)
//	rail=false     rail-optimised network (cluster)
//
// ring, mesh, switch and torus take bw, lat and reduce; cluster takes all
// eight. An unknown key, a key that does not apply, a key given twice, a
// malformed value, a non-finite link bandwidth, a latency above MaxLatency or
// a size below 1 is an error that names the key and the value. Sizes are
// limited to MaxNodes nodes and MaxLinks links, checked before building.
//
// # Presets
//
// Parse also accepts these names, with the same overrides as the kind they
// are built from (Presets lists them with the source of every number):
//
//	dgx-a100     8 A100 on one switch, 300GB/s, 468.125ns per link, reduce 609GB/s
//	dgx-h100     8 H100 on one switch, 450GB/s, 468.125ns per link, reduce 1TB/s
//	hgx-h200     8 H200 on one switch, 450GB/s, 468.125ns per link, reduce 1.43TB/s
//	dgx-h100xN   N dgx-h100 nodes as cluster:Nx8, NDR nicbw=50GB/s, niclat=7us,
//	             pciebw=64GB/s, pcielat=0 (rail=true for rail-optimised)
//	gb200-nvl72  72 B200 on one switch, 900GB/s, 468.125ns per link, reduce 2.39TB/s
//	mac-tb5:N    ring of N Macs over Thunderbolt 5, 10GB/s, 10us, reduce 163GB/s
//	h200-virtual:N  N virtual ranks on one H200 (the cuda backend's --placement
//	             virtual): a switch standing for the HBM, 1/N of 1.075TB/s of
//	             messages and of 1.43TB/s of reduction each, latency 0 until
//	             measured
//
// The single-node presets take bw, lat and reduce; dgx-h100xN takes the
// cluster keys.
//
// # Routing
//
// Route and RouteRanks return the shortest path by latency. They run gonum's
// path.DijkstraFromTo over the topology's own graph type, whose adjacency is
// kept in slices sorted by node index (gonum's simple graphs iterate maps,
// which would make ties random). Each directed edge weighs
//
//	round(latency in picoseconds) + 1/1024
//
// which is exact in float64 for paths under 1024 hops and about 8 s. So
// among equal-latency paths (to the picosecond) the one with fewer hops wins,
// and among those the one Dijkstra settles first, which is fixed because
// neighbours are always offered in ascending node index. A lat=0 mesh thus
// still takes the direct link. Nodes with a single link are offered to
// Dijkstra only as the destination (they cannot be a way through). Routes
// are computed on first use and cached per (source, destination) behind a
// mutex; nothing is precomputed per pair, so memory stays linear in the
// size of the fabric.
//
// # YAML format
//
// Load, ReadYAML and WriteYAML use this format (also in FORMAT.md):
//
//	name: my-fabric
//	nodes:
//	  - {name: gpu0, kind: gpu, reduce: 1.43TB/s}
//	  - {name: gpu1, kind: gpu}
//	  - {name: sw0, kind: switch}
//	links:
//	  - {a: gpu0, b: sw0, bw: 450GB/s, lat: 468.125ns}
//	  - {a: gpu1, b: sw0, bw: 450GB/s, lat: 468.125ns}
//
// name is optional (default empty). nodes is a required list; each node
// needs name and kind (gpu, switch, nic, cpu); reduce is allowed only on
// gpus and defaults to inf. links is a list (it may be omitted for a single
// GPU); each link needs a and b (node names), bw (per direction, with a
// unit) and lat (with a unit, or 0). Any other field, a field given twice, a
// missing field, an unknown node name or anything New refuses is an error
// that names the element (node 3 (gpu3), link 5 (gpu0-sw0)) and its line.
// The order of nodes is the order of ranks. WriteYAML writes this format so
// that ReadYAML gives back an identical topology, floats bit for bit.
//
// # Validation
//
// New refuses: no GPU; an empty, duplicate (naming both indices),
// unprintable or overlong name; an unknown kind; a GPU reduce bandwidth that
// is not > 0, or a reduce bandwidth on a non-GPU; a link endpoint out of
// range, a self-loop, a parallel link, a bandwidth that is not > 0 and
// finite, a latency outside [0, MaxLatency]; and a disconnected graph (naming
// a node not reachable from the first GPU; found with gonum's breadth-first
// traversal). Every error wraps one of ErrSpec, ErrInvalid, ErrYAML or
// ErrRoute and names the offending element and value. No input makes this
// package panic.
package topology

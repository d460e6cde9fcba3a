package topology

import "math"

// PathCost returns the α-β parameters of the route from GPU rank src to
// rank dst: α is the route's latency in seconds, β the seconds per byte of
// its slowest link. With ReduceCost it makes a Topology an ops.CostModel.
func (t *Topology) PathCost(src, dst int) (alpha, beta float64, err error) {
	p, err := t.RouteRanks(src, dst)
	if err != nil {
		return 0, 0, err
	}
	bw := math.Inf(1)
	for _, e := range p.Edges {
		bw = min(bw, t.EdgeBW(e))
	}
	if len(p.Edges) == 0 {
		return p.Latency, 0, nil
	}
	return p.Latency, 1 / bw, nil
}

// ReduceCost returns γ, the seconds per byte of a reduction on GPU rank r
// (0 when reduction is free or r is out of range).
func (t *Topology) ReduceCost(rank int) float64 {
	if rank < 0 || rank >= len(t.gpus) {
		return 0
	}
	bw := t.Nodes[t.gpus[rank]].ReduceBW
	if math.IsInf(bw, 1) || bw <= 0 {
		return 0
	}
	return 1 / bw
}

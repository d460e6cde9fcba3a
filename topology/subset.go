package topology

import "fmt"

// FirstGPUs is the fabric of t's first n GPUs (ranks 0..n-1), as a job that
// asks for n of a machine's GPUs sees it (nccl-tests' -g n): the other GPUs
// and their links are gone, and so is every switch, NIC or CPU left hanging
// from nothing but them (repeatedly: a NIC whose GPU is gone, then a switch
// that only served such NICs). What stays keeps its names, bandwidths and
// latencies; t itself is returned when n is all of its GPUs. The name is
// t's with the count: "dgx-h100 (first 4 GPUs)".
//
// n out of 1..NumGPUs is an ErrSpec error, and a subset that falls apart
// without the other GPUs (the first GPUs of a torus that reach each other
// only through the rest) an ErrInvalid one.
func FirstGPUs(t *Topology, n int) (*Topology, error) {
	if !t.built() {
		return nil, newErr(ErrSpec, "FirstGPUs of a topology not built by New")
	}
	if n < 1 || n > t.NumGPUs() {
		return nil, newErr(ErrSpec, "%d GPUs of %s out of range 1..%d", n, t.Name, t.NumGPUs())
	}
	if n == t.NumGPUs() {
		return t, nil
	}
	keep := make([]bool, len(t.Nodes))
	for v := range t.Nodes {
		keep[v] = t.Nodes[v].Kind != GPU
	}
	for _, v := range t.gpus[:n] {
		keep[v] = true
	}
	// Prune what hangs from nothing kept: nodes other than GPUs with at
	// most one kept neighbour, until none is left.
	degree := make([]int, len(t.Nodes))
	for _, l := range t.Links {
		if keep[l.A] && keep[l.B] {
			degree[l.A]++
			degree[l.B]++
		}
	}
	var queue []int
	for v, k := range keep {
		if k && t.Nodes[v].Kind != GPU && degree[v] <= 1 {
			queue = append(queue, v)
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if !keep[v] {
			continue
		}
		keep[v] = false
		for _, a := range t.adj[t.adjStart[v]:t.adjStart[v+1]] {
			u := int(a.nbr)
			if !keep[u] {
				continue
			}
			if degree[u]--; t.Nodes[u].Kind != GPU && degree[u] <= 1 {
				queue = append(queue, u)
			}
		}
	}
	index := make([]int, len(t.Nodes))
	var nodes []Node
	for v, k := range keep {
		index[v] = -1
		if k {
			index[v] = len(nodes)
			nodes = append(nodes, t.Nodes[v])
		}
	}
	var links []Link
	for _, l := range t.Links {
		if keep[l.A] && keep[l.B] {
			links = append(links, Link{A: index[l.A], B: index[l.B], BW: l.BW, Latency: l.Latency})
		}
	}
	sub, err := New(fmt.Sprintf("%s (first %d GPUs)", t.Name, n), nodes, links)
	if err != nil {
		return nil, wrapErr(ErrInvalid, err, "the first %d GPUs of %s without the others", n, t.Name)
	}
	sub.HostCPU, sub.NICPorts = t.HostCPU, t.NICPorts
	return sub, nil
}

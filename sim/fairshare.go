package sim

import (
	"fmt"
	"math"
	"slices"
)

// MaxMinFair returns the max-min fair rates the fabric gives flows crossing
// links: capacity[l] is link l's capacity (bytes per second, +Inf for
// unlimited) and paths[f] lists the links flow f crosses. It runs the same
// progressive filling the simulator uses, so properties about fairness can
// be tested on it directly.
func MaxMinFair(capacity []float64, paths [][]int) ([]float64, error) {
	links := make([]*link, len(capacity))
	for i, c := range capacity {
		if !(c > 0) || math.IsNaN(c) {
			return nil, fmt.Errorf("sim: link %d: capacity must be > 0, got %v", i, c)
		}
		links[i] = &link{id: i, capacity: c}
	}
	flows := make([]*flow, len(paths))
	for i, path := range paths {
		f := &flow{}
		for j, l := range path {
			if l < 0 || l >= len(links) {
				return nil, fmt.Errorf("sim: flow %d crosses link %d, not one of %d", i, l, len(links))
			}
			if slices.Contains(path[:j], l) {
				return nil, fmt.Errorf("sim: flow %d crosses link %d twice", i, l)
			}
			f.links = append(f.links, links[l])
			links[l].flows = append(links[l].flows, f)
		}
		flows[i] = f
	}
	var fb fabric
	fb.solve(links, flows)
	rates := make([]float64, len(flows))
	for i, f := range flows {
		rates[i] = f.rate
	}
	return rates, nil
}

package main

import (
	"fmt"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/topology"
)

// fabricOfLog is the preset of the machine that log name's device lines
// (nccl-tests' "Using devices") describe, for fidelity and calibrate given
// a log of their own and no --topo: its spec, and a line for stderr that
// says how it was read and what the preset assumes. The lines must name
// every rank, one GPU, and hosts that run as many ranks each, numbered
// host by host, as the presets number them.
func fabricOfLog(cmd, name string, lg *calibrate.Log) (spec, note string, err error) {
	refuse := func(format string, args ...any) (string, string, error) {
		return "", "", usagef("%s needs --topo SPEC|FILE (the fabric %s was measured on): %s", cmd, name, fmt.Sprintf(format, args...))
	}
	if len(lg.Devices) == 0 {
		return refuse("it names no GPUs (nccl-tests' \"Using devices\" lines), from which commsim could take a preset")
	}
	// A log may name a rank twice (each process's copy of the lines):
	// alike, once. Two ranks on one GPU of one host cannot both have run
	// (NCCL refuses it): the host's name stands for several machines.
	type gpuOf struct {
		host, bus string
		gpu       int
	}
	byRank := map[int]calibrate.Device{}
	byGPU := map[gpuOf]calibrate.Device{}
	for _, d := range lg.Devices {
		if was, ok := byRank[d.Rank]; ok {
			if was.Host != d.Host || was.GPU != d.GPU || was.Bus != d.Bus || was.Name != d.Name {
				return refuse("it names rank %d twice, %s device %d [%s] on %s (line %d) and %s device %d [%s] on %s (line %d)",
					d.Rank, was.Name, was.GPU, was.Bus, was.Host, was.Line, d.Name, d.GPU, d.Bus, d.Host, d.Line)
			}
			continue
		}
		byRank[d.Rank] = d
		at := gpuOf{d.Host, d.Bus, d.GPU}
		if was, ok := byGPU[at]; ok {
			return refuse("ranks %d and %d both run on device %d [%s] of %s (lines %d and %d): the name stands for several machines",
				was.Rank, d.Rank, d.GPU, d.Bus, d.Host, was.Line, d.Line)
		}
		byGPU[at] = d
	}
	if len(byRank) != lg.Ranks {
		return refuse("it names the GPUs of %d of its %d ranks", len(byRank), lg.Ranks)
	}
	devs := make([]calibrate.Device, lg.Ranks)
	for r := range devs {
		devs[r] = byRank[r] // every rank below Ranks: Ranks counts the highest
	}
	var hosts []string
	count := map[string]int{}
	for _, d := range devs {
		if d.Name != devs[0].Name {
			return refuse("its ranks run on different GPUs: %s (rank 0) and %s (rank %d, line %d)", devs[0].Name, d.Name, d.Rank, d.Line)
		}
		if count[d.Host] == 0 {
			hosts = append(hosts, d.Host)
		}
		count[d.Host]++
	}
	perHost := count[hosts[0]]
	for r, d := range devs {
		if n := count[d.Host]; n != perHost {
			return refuse("its hosts run different numbers of ranks (%s %d, %s %d)", hosts[0], perHost, d.Host, n)
		}
		if d.Host != hosts[r/perHost] {
			return refuse("its ranks are not numbered host by host (rank %d is on %s, line %d), as the presets number them", r, d.Host, d.Line)
		}
	}
	spec, preset, err := topology.PresetFor(devs[0].Name, len(hosts), perHost)
	if err != nil {
		return refuse("%v", err)
	}
	where := "on one host"
	if len(hosts) > 1 {
		where = fmt.Sprintf("%d on each of %d hosts", perHost, len(hosts))
	}
	note = fmt.Sprintf("%s: --topo not given: %s's %d ranks are %s, %s: %s (%s); give --topo for another fabric",
		cmd, name, lg.Ranks, devs[0].Name, where, spec, preset.Summary)
	return spec, note, nil
}

// logPreset is fabricOfLog for a log that need not be nccl-tests' (tuning
// reads NCCL's own lines), read as data: the preset its device lines name,
// if it parses as nccl-tests output and they name one.
func logPreset(path string, data []byte) (spec, note string, ok bool) {
	lg, err := calibrate.ParseLog(path, data)
	if err != nil {
		return "", "", false
	}
	spec, note, err = fabricOfLog("tuning", path, lg)
	return spec, note, err == nil
}

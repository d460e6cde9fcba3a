package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw/cuda"
)

// bench -J FILE writes the sweep as nccl-tests' JSON report (nccl-tests'
// -J, layout version 3), so that tools built for nccl-tests' reports
// read commsim's, and calibrate and fidelity read it back: the records
// of each size out of place and in place, the command line, the
// environment NCCL reads, NCCL's version and the processes' devices.
// commsim adds what nccl-tests has no key for: each record's algorithm
// and a "commsim" object naming the collective, the topology and the
// backend. A simulated report holds no wall-clock time, process id or
// host, so a rerun writes the same bytes.
type ncclReport struct {
	Version     int        `json:"version"`
	Args        []string   `json:"args"`
	Env         []string   `json:"env"`
	NCCLVersion int        `json:"nccl_version"`
	Config      ncclConfig `json:"config"`
	// Commsim comes before the results, so that a partial report (see
	// keepPartial) still names its collective.
	Commsim struct {
		Op       string `json:"op"`
		Algo     string `json:"algo"`
		Topology string `json:"topology"`
		Backend  string `json:"backend"`
	} `json:"commsim"`
	Results     []ncclResult `json:"results"`
	OutOfBounds struct {
		Count int  `json:"count"`
		Okay  bool `json:"okay"`
	} `json:"out_of_bounds"`
	AverageBusBandwidth struct {
		Bandwidth float64 `json:"bandwidth"`
		Okay      string  `json:"okay"`
	} `json:"average_bus_bandwidth"`
}

type ncclConfig struct {
	Threads      int          `json:"nthreads"`
	GPUs         int          `json:"ngpus"`
	MinBytes     int64        `json:"minimum_bytes"`
	MaxBytes     int64        `json:"maximum_bytes"`
	StepFactor   float64      `json:"step_factor,omitempty"` // a geometric sweep's
	StepBytes    int64        `json:"step_bytes,omitempty"`  // a linear one's
	Warmup       int          `json:"warmup_iters"`
	Iters        int          `json:"iterations"`
	AggIters     int          `json:"aggregated_iterations"`
	Validation   int          `json:"validation"`
	Graph        int          `json:"graph"`
	Blocking     bool         `json:"blocking_collectives"`
	ParallelInit bool         `json:"parallel_init"`
	Devices      []ncclDevice `json:"devices"`
}

// ncclDevice is nccl-tests' line on a process: its first rank and GPU.
type ncclDevice struct {
	Rank       int    `json:"rank"`
	Group      int    `json:"group"`
	PID        int    `json:"pid"`
	Hostname   string `json:"hostname"`
	Device     int    `json:"device"`
	DeviceHex  string `json:"device_hex"`
	DeviceInfo string `json:"device_info"`
}

type ncclResult struct {
	Size       int64      `json:"size"`
	Count      int        `json:"count"`
	Type       string     `json:"type"`
	Redop      string     `json:"redop"`
	Root       string     `json:"root"`
	OutOfPlace ncclTiming `json:"out_of_place"`
	InPlace    ncclTiming `json:"in_place"`
	Iters      int        `json:"actual_iterations"`
	Name       string     `json:"experiment_name"`
	Algo       string     `json:"algo"` // commsim's
}

type ncclTiming struct {
	Time  float64 `json:"time"`
	AlgBW float64 `json:"alg_bw"`
	BusBW float64 `json:"bus_bw"`
	Wrong *int    `json:"nwrong"` // null where not checked
}

// ncclReportOf is the report of rows, measured by s.
func (s *sweep) ncclReportOf(rows []row) ncclReport {
	r := ncclReport{Version: calibrate.LatestJSONLayout, Args: os.Args, Env: s.ncclEnv()}
	r.NCCLVersion = s.ncclVersionCode()
	iters, agg, warmup := s.runsPerSize()
	factor := s.factor
	if s.stepBytes > 0 {
		factor = 0 // a linear sweep's config has step_bytes instead
	}
	r.Config = ncclConfig{Threads: 1, GPUs: s.gpusPerThread(), MinBytes: s.minBytes(), MaxBytes: s.maxBytes, StepFactor: factor, StepBytes: s.stepBytes,
		Warmup: warmup, Iters: iters, AggIters: agg, Validation: map[bool]int{true: 1}[s.check]}
	backend, _ := s.backend.describe(s.timingOnly)
	if m := s.backend.multi; m != nil {
		// One line per process, of one GPU each; only this one's is known.
		r.Config.GPUs = 1
		for rank := range m.rdv.Size {
			r.Config.Devices = append(r.Config.Devices, ncclDevice{Rank: rank})
		}
		if len(s.backend.gpus) > 0 {
			r.Config.Devices[0].Device = s.backend.gpus[0]
		}
	} else {
		// A line a process, of ngpus GPUs each (one on sim without -g, a
		// process a rank): how a reader counts the ranks.
		for rank := 0; rank < s.topo.NumGPUs(); rank += r.Config.GPUs {
			r.Config.Devices = append(r.Config.Devices, ncclDevice{Rank: rank, DeviceInfo: backend + " on " + s.topoName})
		}
	}
	if s.backend.name != "sim" {
		host, _ := os.Hostname()
		r.Config.Devices[0].PID, r.Config.Devices[0].Hostname = os.Getpid(), host
	}
	for _, w := range rows {
		typ := cmp.Or(ncclTypeNames[w.dtype], w.dtype)
		res := ncclResult{Size: w.bytes, Count: w.count, Type: typ, Redop: w.redop, Root: fmt.Sprintf("%6d", w.root),
			OutOfPlace: ncclTimingOf(w.outOfPlace), InPlace: ncclTimingOf(w.inPlace), Iters: iters, Algo: algoCell(w)}
		r.Results = append(r.Results, res)
	}
	wrong, _ := totalWrong(rows)
	r.OutOfBounds.Count, r.OutOfBounds.Okay = wrong, wrong == 0
	r.AverageBusBandwidth.Bandwidth, r.AverageBusBandwidth.Okay = avgBusBW(rows), "unchecked"
	r.Commsim.Op, r.Commsim.Algo, r.Commsim.Topology, r.Commsim.Backend = s.op.String(), s.algo, s.topoName, backend
	return r
}

func ncclTimingOf(res result) ncclTiming {
	return ncclTiming{Time: tidy(res.timeUS), AlgBW: tidy(res.algbw), BusBW: tidy(res.busbw), Wrong: wrongPtr(res.wrong)}
}

// ncclEnv is the environment NCCL reads in this run: with --algo nccl
// the variables that stand for the tuner's options (--nccl-env and the
// flags), on a real backend the NCCL_ variables of the process; sorted.
func (s *sweep) ncclEnv() []string {
	env := []string{}
	switch {
	case s.tuner != nil:
		env = append(env, ncclEnvOf(s.tuner.Options)...)
	case s.backend.name == "cuda":
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "NCCL_") {
				env = append(env, kv)
			}
		}
	}
	slices.Sort(env)
	return env
}

// ncclVersionCode is NCCL_VERSION_CODE of the NCCL this run stands for:
// the tuner's release with --algo nccl (its patch level 0), the library
// loaded for --algo native on cuda, else 0.
func (s *sweep) ncclVersionCode() int {
	switch {
	case s.tuner != nil:
		v := int(s.tuner.Options.Release())
		return v/100*10000 + v%100*100
	case s.backend.name == "cuda" && s.algo == "native":
		if code, err := cuda.NCCLVersion(); err == nil {
			return code
		}
	}
	return 0
}

// writeNCCLReport writes rows to s.jsonOut as nccl-tests' JSON report,
// saying so on stderr. A partial one (the sizes a failed sweep measured)
// is left unfinished after its last record, as nccl-tests leaves partial
// output: no reader takes it for a complete run (calibrate and fidelity
// read its records with a warning that it is partial), and its averages
// and out-of-bounds count, which would speak for the whole sweep, are
// not written.
func (s *sweep) writeNCCLReport(stderr io.Writer, rows []row, partial bool) error {
	err := writeFileAtomic(s.jsonOut, func(w io.Writer) error {
		if !partial {
			return writeJSON(w, s.ncclReportOf(rows))
		}
		var whole bytes.Buffer
		if err := writeJSON(&whole, s.ncclReportOf(rows)); err != nil {
			return err
		}
		doc := whole.Bytes()
		end := bytes.LastIndexByte(doc[:bytes.LastIndex(doc, []byte(`"out_of_bounds":`))], ']') // the results list's
		_, err := w.Write(append(doc[:end:end], '\n'))
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("-J %s: %w", s.jsonOut, err)
	case partial:
		fmt.Fprintf(stderr, "commsim: wrote %s, partial: the %d sizes measured before the failure below, the report left unfinished as nccl-tests leaves it\n", s.jsonOut, len(rows))
	default:
		fmt.Fprintf(stderr, "commsim: wrote %s\n", s.jsonOut)
	}
	return nil
}

// keepPartial writes -J's partial report of the rows a sweep measured
// before it failed with err, and returns err.
func (s *sweep) keepPartial(stderr io.Writer, rows []row, err error) error {
	if s.jsonOut != "" && len(rows) > 0 {
		err = errors.Join(err, s.writeNCCLReport(stderr, rows, true))
	}
	return err
}

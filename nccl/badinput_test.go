package nccl

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// What the tuner is given that NCCL could not run is an error naming it,
// where a System of -8 ranks priced a call at -110 µs, one of no
// architecture was Hopper to some rules and not to others, a Tuner chose for
// 1000 ranks on 8 GPUs, and a NaN launch factor surfaced only as a
// malformed plan when the plan ran.
func TestTunerRefusesWhatNCCLCouldNotRun(t *testing.T) {
	topo, err := topology.Resolve("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	good, err := NewTuner(topo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum}
	wrongRanks := spec
	wrongRanks.Ranks = 1000
	for name, call := range map[string]func() error{
		"negative ranks": func() error {
			_, err := Tune(System{Ranks: -8, Nodes: 1, PerNode: -8}, ops.AllReduce, 1024, Options{})
			return err
		},
		"zero system": func() error { _, err := Tune(System{}, ops.AllReduce, 1024, Options{}); return err },
		"negative channels in a choice": func() error {
			c, err := good.Choose(spec)
			if err != nil {
				return nil
			}
			c.Channels = -1
			_, err = Plan(good.System, spec, c, good.Options)
			return err
		},
		"negative bytes": func() error { _, err := Tune(good.System, ops.AllReduce, -1, Options{}); return err },
		"unknown architecture": func() error {
			s := good.System
			s.Arch = topology.UnknownArch
			if e := Estimates(s, ops.AllReduce, 1<<30, Options{}); !strings.Contains(e[0].Off, "no GPU architecture") {
				t.Errorf("unknown architecture: estimate %v", e[0])
			}
			_, err := Tune(s, ops.AllReduce, 1<<30, Options{})
			return err
		},
		"NaN bandwidth": func() error {
			s := good.System
			s.IntraBW = math.NaN()
			_, err := Tune(s, ops.AllReduce, 1024, Options{})
			return err
		},
		"ranks not the fabric's":         func() error { _, err := good.Choose(wrongRanks); return err },
		"ranks not the fabric's, ranked": func() error { _, err := good.Ranked(wrongRanks); return err },
		"zero tuner":                     func() error { _, err := (&Tuner{}).Choose(spec); return err },
		"nil tuner":                      func() error { _, _, err := (*Tuner)(nil).Plan(spec); return err },
		"nil tuner's environment":        func() error { _, err := (*Tuner)(nil).With(Options{}); return err },
		"no GPUs":                        func() error { _, err := NewTuner(&topology.Topology{}, Options{}); return err },
		"a link of more NVLinks than an int counts": func() error {
			huge, err := topology.Resolve("ring:4,bw=1e50GB/s")
			if err != nil {
				return nil
			}
			_, err = NewTuner(huge, Options{})
			if err != nil && !strings.Contains(err.Error(), "more than NCCL's model can count") {
				t.Errorf("a link of 1e50 GB/s: %v", err)
			}
			return err
		},
		"NaN launch": func() error {
			_, err := NewTuner(topo, Options{Machine: Machine{Launch: math.NaN()}})
			return err
		},
		"negative bandwidth factor": func() error {
			_, err := NewTuner(topo, Options{Machine: Machine{Bandwidth: [numProtos]float64{-1, 0, 0}}})
			return err
		},
		"infinite channel rate": func() error {
			_, err := NewTuner(topo, Options{Machine: Machine{ChannelGBps: math.Inf(1)}})
			return err
		},
		"unknown algorithm":  func() error { _, err := NewTuner(topo, Options{Algos: []Algo{200}}); return err },
		"PAT off and forced": func() error { _, err := NewTuner(topo, Options{NoPAT: true, ForcePAT: true}); return err },
		"algorithms for no collective": func() error {
			_, err := NewTuner(topo, Options{OpAlgos: map[ops.Op][]Algo{99: {Ring}}})
			return err
		},
		"unknown protocol": func() error {
			_, err := NewTuner(topo, Options{OpProtos: map[ops.Op][]ops.Protocol{ops.AllReduce: {200}}})
			return err
		},
	} {
		if err := call(); err == nil || !strings.HasPrefix(err.Error(), "nccl: ") && !strings.HasPrefix(err.Error(), "ops: ") {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	// What a nil or zero tuner prices is nothing, not a panic.
	if (*Tuner)(nil).ChannelGBps() != 0 || (*Tuner)(nil).FixedLaunch(spec, Choice{}) != 0 || (&Tuner{}).TreeDip(spec, Choice{Estimate: Estimate{Protocol: ops.ProtoSimple}}) != 0 {
		t.Error("a nil or zero tuner prices something")
	}
	if l := Label(nil); l != "" {
		t.Errorf("Label(nil) = %q, want none", l)
	}
}

// TestTunerChecksOptionsSetAfterIt: Options is the caller's to write, and
// what NewTuner or With would refuse is refused by every call after
// (a Simple buffer of one byte divided a point-to-point split by zero; a
// negative launch factor made a plan of negative launch).
func TestTunerChecksOptionsSetAfterIt(t *testing.T) {
	topo, err := topology.Resolve("dgx-h100x2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"buffer of a byte", func(o *Options) { o.BuffSize = 1 }, "buff"},
		{"negative launch", func(o *Options) { o.Machine.Launch = -90 }, "launch"},
	} {
		tuner, err := NewTuner(topo, Options{})
		if err != nil {
			t.Fatal(err)
		}
		tc.set(&tuner.Options)
		for _, spec := range []ops.Spec{
			{Op: ops.SendRecv, Ranks: 16, Count: 256, DType: hw.F32},
			{Op: ops.AllReduce, Ranks: 16, Count: 256, DType: hw.F32, Redop: hw.Sum},
		} {
			if _, _, err := tuner.Plan(spec); err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.want) {
				t.Errorf("%s: Plan(%v): %v, want an error naming %s", tc.name, spec.Op, err, tc.want)
			}
			if _, err := tuner.Ranked(spec); err == nil {
				t.Errorf("%s: Ranked(%v) took the options", tc.name, spec.Op)
			}
		}
	}
}

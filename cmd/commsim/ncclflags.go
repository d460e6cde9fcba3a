package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// algoNCCL is --algo nccl: for each size, what NCCL's own tuner would run
// (package nccl), simulated.
const algoNCCL = "nccl"

// ncclFlags are NCCL's environment for --algo nccl, in the spirit of
// NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS, NCCL_BUFFSIZE and
// NCCL_NCHANNELS_PER_NET_PEER.
type ncclFlags struct {
	version, algos, protos, machine, buffsize string
	channels, netPeerChannels                 int
	// env is NCCL's environment as NAME=VALUE pairs (nccl.FromEnv), for
	// the variables no flag of their own sets.
	env []string
	// flags are the flags registered, which say whether --nccl-version was
	// given (its default, 2.30, may be given too).
	flags *pflag.FlagSet
	// runEnv, when set, is the environment a log's run had: a shipped
	// log's (fidelity's mapping file), or what NCCL's own lines in the log
	// state; it is taken when no flag sets one.
	runEnv *nccl.Options
}

func (f *ncclFlags) register(fl *pflag.FlagSet) {
	f.flags = fl
	fl.StringVar(&f.version, "nccl-version", "2.30", "with --algo nccl: the NCCL release whose tuning constants to use (2.18 … 2.30), for older logs")
	fl.StringVar(&f.algos, "nccl-algo", "", "with --algo nccl: the algorithms NCCL may choose, as NCCL_ALGO (comma-separated: ring, tree, nvls, nvlstree, collnet_direct, collnet_chain, pat; ^ first for all but those; then ;-separated entries such as allreduce:tree for one collective); default all")
	fl.StringVar(&f.protos, "nccl-proto", "", "with --algo nccl: the protocols NCCL may choose, as NCCL_PROTO (comma-separated: LL, LL128, Simple; ^ first for all but those; then ;-separated entries such as allreduce:LL128 for one collective); default all")
	fl.IntVar(&f.channels, "nccl-channels", 0, "with --algo nccl: the channels the collectives run on, as NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS (NCCL's choice does not see them; each runs at most a search channel's speed); 0 leaves them to NCCL")
	fl.IntVar(&f.netPeerChannels, "nccl-net-peer-channels", 0, "with --algo nccl: the channels all-to-all, gather and sendrecv give a peer across the network, as NCCL_NCHANNELS_PER_NET_PEER; 0 is NCCL's default")
	fl.StringVar(&f.buffsize, "nccl-buffsize", "", "with --algo nccl: the bytes of each connection's Simple buffer, as NCCL_BUFFSIZE (e.g. 8388608 or 8MiB); default NCCL's 4MiB")
	fl.StringArrayVar(&f.env, "nccl-env", nil, "with --algo nccl: an NCCL environment variable, NAME=VALUE, as NCCL reads it; repeat for more. commsim follows "+strings.Join(nccl.EnvVars, ", "))
	fl.StringVar(&f.machine, "nccl-machine", "", "with --algo nccl: how the machine departs from NCCL's model, as calibrate prints it: "+
		"launch=F,hop=F,ll=F,ll128=F,simple=F,nic=F (factors; those left out are 1; nic scales the network links, which NCCL's tuner still reads at line rate), "+
		"and channel=GB/s, what one channel (a block of threads) moves: at most, for a ring or a tree; for a point-to-point exchange, in place of a ring channel's share. "+
		"Left out, or channel=arch, it is what published runs measure on the fabric's GPUs (Hopper 20.3, Blackwell 22.3; none before); channel=none leaves each channel its share of NCCL's model")
}

// set reports whether any NCCL flag differs from its default.
func (f *ncclFlags) set() bool { return f.envSet() || f.machine != "" }

// envSet reports whether a flag sets NCCL's environment: any NCCL flag
// but --nccl-machine, which says how the machine runs what NCCL chooses.
// A log's run environment is taken only when none does.
func (f *ncclFlags) envSet() bool {
	if f.flags != nil && f.flags.Changed("nccl-version") {
		return true
	}
	return f.version != "2.30" && f.version != "" || f.algos != "" || f.protos != "" || f.channels != 0 || f.buffsize != "" || f.netPeerChannels != 0 || len(f.env) > 0
}

// aloneError is the usage error for NCCL flags given without nccl to
// go with (where: "--algo nccl", or "nccl among --algos").
func (f *ncclFlags) aloneError(where string) error {
	return usagef("--nccl-version, --nccl-algo, --nccl-proto, --nccl-channels, --nccl-net-peer-channels, --nccl-buffsize, --nccl-env and --nccl-machine go with %s", where)
}

// maxMachineFactor bounds --nccl-machine's factors both ways: calibrate
// fits within ×0.05 to ×20, and a machine a thousand times faster or
// slower than NCCL's model is another fabric (a factor of 1e300 made every
// time infinite).
const maxMachineFactor = 1000.0

// machineFactors reads --nccl-machine: NCCL's machine, and the scale of
// the network links' bandwidth (1 when not given).
func (f *ncclFlags) machineFactors() (nccl.Machine, float64, error) {
	var m nccl.Machine
	nic := 1.0
	seen := map[string]bool{}
	for _, kv := range splitList(f.machine) {
		key, val, ok := strings.Cut(kv, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if word := strings.TrimSpace(val); key == "channel" && (word == "arch" || word == "none") {
			// arch is the default, named; none drops the rate.
			if seen[key] {
				return m, 0, usagef("--nccl-machine: %s given twice", key)
			}
			seen[key], m.NoChannelRate = true, word == "none"
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		want := "a factor"
		if key == "channel" {
			want = "a rate in GB/s (or arch, or none)"
		}
		switch {
		case !ok:
			return m, 0, usagef("--nccl-machine %q: want key=factor, e.g. launch=1.3", kv)
		case err != nil || !(v >= 1/maxMachineFactor && v <= maxMachineFactor):
			return m, 0, usagef("--nccl-machine %s: want %s from %g to %g, not %q", key, want, 1/maxMachineFactor, maxMachineFactor, val)
		case seen[key]:
			return m, 0, usagef("--nccl-machine: %s given twice", key)
		}
		seen[key] = true
		switch key {
		case "launch":
			m.Launch = v
		case "hop":
			m.Hop = v
		case "ll":
			m.Bandwidth[0] = v
		case "ll128":
			m.Bandwidth[1] = v
		case "simple":
			m.Bandwidth[2] = v
		case "nic":
			nic = v
		case "channel":
			m.ChannelGBps = v
		default:
			return m, 0, usagef("--nccl-machine: unknown factor %q (want launch, hop, ll, ll128, simple, nic or channel)", key)
		}
	}
	return m, nic, nil
}

// useLogEnv takes the environment NCCL's own lines in lg state (its
// version, and the variables NCCL_DEBUG=INFO says it read) for the run,
// unless a flag sets one. It returns what it took: as a line for a
// report's header ("" for nothing), and the variables commsim follows;
// and a usage error where the log states what NCCL would not run with.
func (f *ncclFlags) useLogEnv(lg *calibrate.Log) (note string, env map[string]string, err error) {
	if f.envSet() || f.runEnv != nil {
		return "", nil, nil
	}
	run, stated, err := lg.NCCLOptions()
	if err != nil {
		return "", nil, usagef("%v (give --nccl-version or --nccl-env to replace it)", err)
	}
	if !stated {
		return "", nil, nil
	}
	f.runEnv = &run.Options
	took := strings.Fields(envString(run.Env))
	if lg.NCCLVersion != "" {
		stated := "NCCL " + lg.NCCLVersion
		if v := run.Options.Release(); !strings.HasPrefix(lg.NCCLVersion+".", v.String()+".") {
			stated += fmt.Sprintf(" (priced with %s's constants, the latest the model has)", v)
		}
		took = append([]string{stated}, took...)
	}
	note = "NCCL's tuner runs in the environment the log states: " + strings.Join(took, ", ")
	if len(run.Ignored) > 0 {
		note += "; not modelled: " + strings.Join(run.Ignored, ", ")
	}
	return note, run.Env, nil
}

// options reads the flags; each failure is a usage error.
func (f *ncclFlags) options() (nccl.Options, error) {
	if f.runEnv != nil && !f.envSet() {
		return *f.runEnv, nil
	}
	o, env, err := f.envOptions()
	if err != nil {
		return o, err
	}
	// twice refuses a flag set along with the variable it stands for.
	twice := func(flag string, names ...string) error {
		for _, name := range names {
			if _, ok := env[name]; ok {
				return usagef("%s and --nccl-env %s both set it: give one", flag, name)
			}
		}
		return nil
	}
	if f.version != "" {
		if o.Version, err = nccl.ParseRelease(f.version); err != nil {
			return o, usagef("--nccl-version: %v", err)
		}
		if o.Version > nccl.V2_30 {
			// A log's newer release is priced with the newest constants,
			// and says so; a flag asking for one is told instead.
			return o, usagef("--nccl-version %s: the model has NCCL 2.18 to %s's constants; give %s to price a newer release with the newest", f.version, nccl.V2_30, nccl.V2_30)
		}
	}
	if strings.TrimSpace(f.algos) != "" {
		if err := twice("--nccl-algo", "NCCL_ALGO"); err != nil {
			return o, err
		}
		if o.Algos, o.OpAlgos, err = nccl.ParseAlgos(f.algos); err != nil {
			return o, usagef("--nccl-algo %s: %v", f.algos, err)
		}
	}
	if strings.TrimSpace(f.protos) != "" {
		if err := twice("--nccl-proto", "NCCL_PROTO"); err != nil {
			return o, err
		}
		if o.Protos, o.OpProtos, err = nccl.ParseProtos(f.protos); err != nil {
			return o, usagef("--nccl-proto %s: %v", f.protos, err)
		}
	}
	if f.channels < 0 || f.channels > 64 {
		return o, usagef("--nccl-channels %d: want 0 (the model's choice) to 64", f.channels)
	}
	if f.channels > 0 {
		if err := twice("--nccl-channels", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"); err != nil {
			return o, err
		}
		o.Channels = f.channels
	}
	if f.netPeerChannels < 0 || f.netPeerChannels > 64 {
		return o, usagef("--nccl-net-peer-channels %d: want 0 (NCCL's default) to 64", f.netPeerChannels)
	}
	if f.netPeerChannels > 0 {
		if err := twice("--nccl-net-peer-channels", "NCCL_NCHANNELS_PER_NET_PEER"); err != nil {
			return o, err
		}
		o.NetPeerChannels = f.netPeerChannels
	}
	if f.buffsize != "" {
		if err := twice("--nccl-buffsize", "NCCL_BUFFSIZE"); err != nil {
			return o, err
		}
		b, err := parseBytes(f.buffsize)
		if err != nil {
			return o, usagef("--nccl-buffsize: %v", err)
		}
		if b < nccl.MinBuffSize || b > nccl.MaxBuffSize {
			return o, usagef("--nccl-buffsize %s: want %s to %s", f.buffsize, formatBytes(nccl.MinBuffSize), formatBytes(nccl.MaxBuffSize))
		}
		o.BuffSize = b
	}
	return o, nil
}

// envOptions reads --nccl-env: the options it sets, and the variables.
func (f *ncclFlags) envOptions() (nccl.Options, map[string]string, error) {
	env := map[string]string{}
	for _, kv := range f.env {
		name, value, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		switch _, seen := env[name]; {
		case !ok || name == "":
			return nccl.Options{}, nil, usagef("--nccl-env %q: want NAME=VALUE, e.g. NCCL_NVLS_ENABLE=0", kv)
		case seen:
			return nccl.Options{}, nil, usagef("--nccl-env: %s given twice", name)
		}
		env[name] = value
	}
	o, err := nccl.FromEnv(env)
	if err != nil {
		return o, nil, usagef("--nccl-env: %v", strings.TrimPrefix(err.Error(), "nccl: "))
	}
	return o, env, nil
}

// useNCCL readies the sweep for --algo nccl: NCCL's tuner on its fabric,
// in the environment f says.
func (s *sweep) useNCCL(f ncclFlags) error {
	switch {
	case !slices.Contains(nccl.Ops(), s.op):
		return usagef("--algo nccl plans %s, not %s", joinOps(nccl.Ops()), s.op)
	case s.backend.name != "sim":
		return usagef("--algo nccl predicts NCCL on the simulator; on GPUs, --algo native runs NCCL itself")
	}
	var err error
	if s.tuner, s.topo, err = f.tuner(s.topo); err != nil {
		return err
	}
	s.machine, s.channelNote = strings.TrimSpace(f.machine), channelNote(s.tuner)
	return nil
}

// channelOnly reports whether --nccl-machine gives a channel rate and no
// factor: all calibrate takes of it (a malformed value is reported where
// the flag is read).
func (f *ncclFlags) channelOnly() bool {
	m, nic, err := f.machineFactors()
	return err != nil || m.Launch == 0 && m.Hop == 0 && m.Bandwidth == [3]float64{} && nic == 1
}

// defaultMachine reports whether --nccl-machine leaves the machine as
// NCCL's model with the measured channel rate (not given, or channel=arch).
func (f *ncclFlags) defaultMachine() bool {
	m, nic, err := f.machineFactors()
	return err == nil && m == (nccl.Machine{}) && nic == 1
}

// channelNote is a report's line on the channel rate where it is the one
// measured on t's GPUs, as by default (a rate --nccl-machine gives is in
// the flag, which reports print); "" where none applies.
func channelNote(t *nccl.Tuner) string {
	if t.Options.Machine.ChannelGBps > 0 || t.ChannelGBps() == 0 {
		return ""
	}
	return fmt.Sprintf("a channel moves at most %g GB/s, what published runs measure on %s (nccl.MeasuredChannel; --nccl-machine channel=none leaves each its share of NCCL's model)", t.ChannelGBps(), t.System.Arch)
}

// tuner is NCCL's tuner on topo in the environment f says, and the fabric
// to simulate its plans on: topo, its network scaled when --nccl-machine
// says the machine's delivers less (the tuner keeps the fabric NCCL sees).
func (f ncclFlags) tuner(topo *topology.Topology) (*nccl.Tuner, *topology.Topology, error) {
	o, err := f.options()
	if err != nil {
		return nil, nil, err
	}
	m, nic, err := f.machineFactors()
	if err != nil {
		return nil, nil, err
	}
	o.Machine = m
	t, err := nccl.NewTuner(topo, o)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if nic != 1 {
		if topo, err = calibrate.ScaleNetwork(topo, nic); err != nil {
			return nil, nil, usageError{err}
		}
	}
	return t, topo, nil
}

// optionFlags writes o's environment as the --nccl-* flags that set it
// (all but the machine), for a command line that repeats a run: empty
// for NCCL's defaults.
func optionFlags(o nccl.Options) string {
	var out []string
	if o.Release() != nccl.V2_30 {
		out = append(out, "--nccl-version "+o.Version.String())
	}
	if l := envList(o.Algos, o.OpAlgos, algoEnvName); l != "" {
		out = append(out, "--nccl-algo "+shellWord(l))
	}
	if l := envList(o.Protos, o.OpProtos, ops.Protocol.String); l != "" {
		out = append(out, "--nccl-proto "+shellWord(l))
	}
	if o.Channels > 0 {
		out = append(out, "--nccl-channels "+strconv.Itoa(o.Channels))
	}
	if o.NetPeerChannels > 0 {
		out = append(out, "--nccl-net-peer-channels "+strconv.Itoa(o.NetPeerChannels))
	}
	if o.BuffSize > 0 {
		out = append(out, "--nccl-buffsize "+strconv.FormatInt(o.BuffSize, 10))
	}
	for _, v := range o.Env() {
		if name, _, _ := strings.Cut(v, "="); name != "NCCL_NCHANNELS_PER_NET_PEER" && name != "NCCL_BUFFSIZE" {
			out = append(out, "--nccl-env "+v)
		}
	}
	return strings.Join(out, " ")
}

// ncclEnvOf is the environment that sets o as NCCL reads it, NAME=VALUE:
// NCCL_ALGO, NCCL_PROTO, the channels as NCCL_MIN_NCHANNELS and
// NCCL_MAX_NCHANNELS, then Options.Env's. The release is not a variable.
func ncclEnvOf(o nccl.Options) []string {
	var env []string
	if l := envList(o.Algos, o.OpAlgos, algoEnvName); l != "" {
		env = append(env, "NCCL_ALGO="+l)
	}
	if l := envList(o.Protos, o.OpProtos, ops.Protocol.String); l != "" {
		env = append(env, "NCCL_PROTO="+l)
	}
	if o.Channels > 0 {
		n := strconv.Itoa(o.Channels)
		env = append(env, "NCCL_MIN_NCHANNELS="+n, "NCCL_MAX_NCHANNELS="+n)
	}
	return append(env, o.Env()...)
}

// algoEnvName is a as NCCL_ALGO spells it.
func algoEnvName(a nccl.Algo) string { return strings.ReplaceAll(a.String(), "-", "_") }

// shellWord quotes an NCCL_ALGO or NCCL_PROTO list for a shell where it
// has several entries.
func shellWord(l string) string {
	if strings.ContainsAny(l, ";:") {
		return "'" + l + "'"
	}
	return l
}

// envList writes a list for every collective and lists per collective
// as NCCL_ALGO and NCCL_PROTO spell them: "" when there is none.
func envList[T any](every []T, perOp map[ops.Op][]T, name func(T) string) string {
	join := func(l []T) string {
		names := make([]string, len(l))
		for i, v := range l {
			names[i] = name(v)
		}
		return strings.Join(names, ",")
	}
	var entries []string
	if every != nil {
		entries = append(entries, join(every))
	}
	for _, op := range nccl.Ops() { // in a fixed order
		if l, ok := perOp[op]; ok {
			entries = append(entries, op.String()+":"+join(l))
		}
	}
	return strings.Join(entries, ";")
}

// splitList splits a comma-separated list, dropping blanks around names.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// joinOps names ops, comma-separated.
func joinOps(list []ops.Op) string {
	names := make([]string, len(list))
	for i, o := range list {
		names[i] = o.String()
	}
	return strings.Join(names, ", ")
}
